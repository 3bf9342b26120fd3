// The lab cluster's DNS: CoreDNS as kubeadm deploys it (the `kube-dns` Service at the service
// range's .10, which every kubelet names as clusterDNS), with the image the bootstrap builds. The
// lab's namespaces reach no resolver outside, so it answers the cluster's names only and forwards
// nothing: any other name fails at once instead of timing out.
import { restrictedPodSecurityContext } from "@portable-lb/core";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { labImage } from "./node/labImages.ts";

export interface ClusterDnsArgs {
  /** The Service's address (the kubelets' clusterDNS). */
  clusterIp: string;
  replicas?: number;
}

const COREFILE = `.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    cache 30
    reload
    loadbalance
}
`;

export class ClusterDns extends pulumi.ComponentResource {
  constructor(name: string, args: ClusterDnsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:lab:ClusterDns", name, {}, opts);
    const child = { parent: this };
    const namespace = "kube-system";
    const labels = { "k8s-app": "kube-dns" };
    const account = new k8s.core.v1.ServiceAccount(
      `${name}-sa`,
      { metadata: { name: "coredns", namespace } },
      child,
    );
    // What CoreDNS's kubernetes plugin reads, and nothing more.
    const role = new k8s.rbac.v1.ClusterRole(
      `${name}-role`,
      {
        metadata: { name: "system:coredns" },
        rules: [
          {
            apiGroups: [""],
            resources: ["endpoints", "services", "pods", "namespaces"],
            verbs: ["list", "watch"],
          },
          { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
        ],
      },
      child,
    );
    new k8s.rbac.v1.ClusterRoleBinding(
      `${name}-binding`,
      {
        metadata: { name: "system:coredns" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role.metadata.name },
        subjects: [{ kind: "ServiceAccount", name: account.metadata.name, namespace }],
      },
      child,
    );
    const corefile = new k8s.core.v1.ConfigMap(
      `${name}-config`,
      { metadata: { name: "coredns", namespace }, data: { Corefile: COREFILE } },
      child,
    );
    new k8s.apps.v1.Deployment(
      `${name}-deployment`,
      {
        metadata: { name: "coredns", namespace, labels },
        spec: {
          replicas: args.replicas ?? 2,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              serviceAccountName: account.metadata.name,
              // It is the cluster's resolver: it cannot use itself.
              dnsPolicy: "Default",
              priorityClassName: "system-cluster-critical",
              affinity: {
                podAntiAffinity: {
                  preferredDuringSchedulingIgnoredDuringExecution: [
                    {
                      weight: 100,
                      podAffinityTerm: {
                        labelSelector: { matchLabels: labels },
                        topologyKey: "kubernetes.io/hostname",
                      },
                    },
                  ],
                },
              },
              securityContext: restrictedPodSecurityContext(65532),
              containers: [
                {
                  name: "coredns",
                  image: labImage("coredns").ref,
                  imagePullPolicy: "Never",
                  args: ["-conf", "/etc/coredns/Corefile"],
                  ports: [
                    { name: "dns", containerPort: 53, protocol: "UDP" },
                    { name: "dns-tcp", containerPort: 53, protocol: "TCP" },
                    { name: "metrics", containerPort: 9153, protocol: "TCP" },
                  ],
                  securityContext: {
                    allowPrivilegeEscalation: false,
                    readOnlyRootFilesystem: true,
                    // Port 53 as a non-root user: the one capability it needs.
                    capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] },
                  },
                  livenessProbe: {
                    httpGet: { path: "/health", port: 8080 },
                    initialDelaySeconds: 10,
                    periodSeconds: 10,
                  },
                  readinessProbe: { httpGet: { path: "/ready", port: 8181 }, periodSeconds: 2 },
                  resources: { requests: { cpu: "20m", memory: "30Mi" }, limits: { memory: "170Mi" } },
                  volumeMounts: [{ name: "config", mountPath: "/etc/coredns", readOnly: true }],
                },
              ],
              volumes: [{ name: "config", configMap: { name: corefile.metadata.name } }],
            },
          },
        },
      },
      child,
    );
    new k8s.core.v1.Service(
      `${name}-service`,
      {
        metadata: { name: "kube-dns", namespace, labels },
        spec: {
          clusterIP: args.clusterIp,
          selector: labels,
          ports: [
            { name: "dns", port: 53, protocol: "UDP", targetPort: 53 },
            { name: "dns-tcp", port: 53, protocol: "TCP", targetPort: 53 },
            { name: "metrics", port: 9153, protocol: "TCP", targetPort: 9153 },
          ],
        },
      },
      child,
    );
    this.registerOutputs({});
  }
}
