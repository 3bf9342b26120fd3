// A small Ginkgo suite of Kubernetes' own e2e tests: k8s.io/kubernetes/test/e2e/network (whose
// `[sig-network] LoadBalancers` specs `npm run conformance` focuses on) with the framework driven as
// upstream's e2e.test drives it (test/e2e/e2e_test.go, e2e.go), without every other SIG's tests and
// the cloud providers' packages. Built by scripts/conformance/build.sh at KUBERNETES_VERSION.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	utilnet "k8s.io/utils/net"

	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"
	e2epod "k8s.io/kubernetes/test/e2e/framework/pod"

	// The framework as upstream's suite configures it: features declared, namespaces dumped on
	// failure, every node checked Ready after each spec, gomega's output formatted.
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/format"
	// klog's flags (--v), as upstream registers them.
	_ "k8s.io/component-base/logs/testinit"

	// The tests.
	_ "k8s.io/kubernetes/test/e2e/network"
)

// Once per run, as upstream's setupSuite: the cluster is healthy before any spec starts.
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client from --kubeconfig")
	timeouts := framework.NewTimeoutContext()
	framework.ExpectNoError(e2enode.WaitForAllNodesSchedulable(ctx, c, timeouts.NodeSchedulable))
	if framework.TestContext.CloudConfig.NumNodes == framework.DefaultNumNodes {
		nodes, err := e2enode.GetReadySchedulableNodes(ctx, c)
		framework.ExpectNoError(err)
		framework.TestContext.CloudConfig.NumNodes = len(nodes.Items)
	}
	framework.ExpectNoError(e2epod.WaitForAlmostAllPodsReady(ctx, c, metav1.NamespaceSystem,
		framework.TestContext.MinStartupPods, framework.TestContext.AllowedNotReadyNodes, timeouts.SystemPodsStartup),
		"kube-system's pods are not all running and ready")
	framework.Logf("e2e test version: %s", version.Get().GitVersion)
	if v, err := c.Discovery().ServerVersion(); err == nil {
		framework.Logf("kube-apiserver version: %s", v.GitVersion)
	}
	return nil
}, func(ctx context.Context, _ []byte) {
	// Every Ginkgo process: the cluster's IP family, from the kubernetes Service (setupSuitePerGinkgoNode).
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client from --kubeconfig")
	svc, err := c.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	framework.ExpectNoError(err, "reading the kubernetes Service")
	framework.TestContext.IPFamily = "ipv4"
	if utilnet.IsIPv6String(svc.Spec.ClusterIP) {
		framework.TestContext.IPFamily = "ipv6"
	}
	framework.Logf("Cluster IP family: %s", framework.TestContext.IPFamily)
})

// ginkgo.RunSpecs outside `go test` only needs something to tell of a failure.
type failer struct{}

func (failer) Fail() {}

func main() {
	showVersion := flag.Bool("version", false, "Displays version information.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.Args())
		os.Exit(2)
	}
	// Upstream's suite implements these two in its setup; this one does not (and --clean-start would
	// delete every namespace of the cluster but the system ones: the lab's own workloads too).
	if framework.TestContext.CleanStart || framework.TestContext.PrepullImages {
		fmt.Fprintln(os.Stderr, "--clean-start and --prepull-images are not supported by this suite")
		os.Exit(2)
	}
	framework.AfterReadingAllFlags(&framework.TestContext)

	// As upstream's RunE2ETests: logs on, contextual logging back on, framework.Fail for gomega.
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	if !ginkgo.RunSpecs(failer{}, "Kubernetes e2e suite (network)", suiteConfig, reporterConfig) {
		logs.FlushLogs()
		os.Exit(1)
	}
}
