// The real controller drives IPVS: the LB image's controller command, run as the rendered pod spec
// runs it (config file, env, user, capabilities, no_new_privs, read-only root, the pod's sysctls;
// guestContainer.ts says what the guest leaves out), inside the QEMU guest's LB namespace, with
// dataPlane.engine ipvs. It watches this run's kube-apiserver, reached through QEMU's restricted user
// networking (one forward, GUEST_API), and programs IPVS in NAT mode for a Service of type
// LoadBalancer that this test makes, with its EndpointSlice, in its own namespace. The guest's
// network is routedTopology.ts's, where backends reply by their own route, so requests from the
// client namespace answer only if the controller's IPVS engine masquerades. Then the test removes a
// backend from the EndpointSlice, and IPVS follows. One guest boot.
// Not here: DSR (the config refuses dsr with engine ipvs: DSR runs on the nftables engine; IPVS
// tunnel mode is covered by ipvsRouted.test.ts with the engine alone), the BGP speaker (the guest
// has no BIRD; POD_IP/HOST_IP, which turn the controller's speaker control on, are left out).
import { CoreV1Api, DiscoveryV1Api } from "@kubernetes/client-node";
import { LB_PATHS, lbConfigSchema } from "@portable-lb/core/config";
import { randomUUID } from "node:crypto";
import { lbService, slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import { renderedLbPodSpec } from "../harness/netns/lbPod.ts";
import { backendPage } from "../harness/qemu/guestTopology.ts";
import { GUEST_SETPRIV_PROGRAM, guestContainer } from "../harness/qemu/guestContainer.ts";
import { guestLbApp } from "../harness/qemu/guestLbApp.ts";
import { GUEST_NODE_MEMORY_MIB, guestNodeEntries } from "../harness/qemu/guestNode.ts";
import { guestSection } from "../harness/qemu/guestOutput.ts";
import { GUEST_API, GUEST_PATHS, runInIpvsGuest, type IpvsGuestResult } from "../harness/qemu/ipvsGuest.ts";
import { routedTopology } from "../harness/qemu/routedTopology.ts";
import { TEST_ENV, testKubeConfig } from "../harness/testEnv.ts";

const NS = `ipvsctl-${process.pid}`;
// A class of its own: integration tests share one API server, and every class has its own allocator.
const config = lbConfigSchema.parse({
  loadBalancerClass: "portable-lb.io/ipvsctl",
  routingMode: "bgp",
  podCidr: "10.3.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.2.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "ipvs" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const VIP = "10.1.2.1";
const topo = routedTopology({ backends: 3, lbs: 1 });
const [lb] = topo.lbs as [{ ns: string; ip: string }];
const [b1, b2, b3] = topo.backendIps as [string, string, string];
const KUBECONFIG = "/test/kubeconfig";
const { ip, ipvsadm } = GUEST_PATHS;
/** The line the script prints when the host should remove b1 from the EndpointSlice. */
const REMOVE_B1 = "@@HOST remove-b1";

const adminKc = testKubeConfig();
const core = adminKc.makeApiClient(CoreV1Api);
const discovery = adminKc.makeApiClient(DiscoveryV1Api);
const endpoints = (ips: string[]) =>
  slice(
    "web",
    ips.map((address) => ({ ip: address })),
    { ns: NS, name: "web-1", port: topo.port },
  );

const app = guestLbApp();
const controller = guestContainer({
  spec: renderedLbPodSpec(config),
  container: "controller",
  netns: lb.ns,
  fields: {
    "spec.nodeName": "ipvs-guest",
    "metadata.name": "lb-guest-1",
    "metadata.namespace": NS,
    "metadata.uid": randomUUID(),
  },
  image: app.imageConfig,
  // The test's admin credentials stand in for the ServiceAccount token a cluster mounts.
  env: { KUBECONFIG },
  omitEnv: ["POD_IP", "HOST_IP"],
});

const masqServers = `${ip} netns exec ${lb.ns} ${ipvsadm} -Ln -t ${VIP}:${topo.port} 2>/dev/null | grep -c Masq || true`;
/** Waits (bounded) until IPVS has `n` NAT-mode servers for the VIP; exits 92 with the log if not. */
const awaitServers = (n: number, seconds: number) =>
  `i=0; until [ "$(${masqServers})" = ${n} ]; do i=$((i + 1)); ` +
  `if [ $i -gt ${seconds * 5} ] || ! kill -0 $ctl 2>/dev/null; then echo "=== failed: never ${n} servers"; ` +
  `${ip} netns exec ${lb.ns} ${ipvsadm} -Ln; cat /tmp/controller.log; exit 92; fi; sleep 0.2; done`;
const client = `${ip} netns exec client`;
const get = (n: number) =>
  `for i in $(seq ${n}); do ${client} timeout 5 wget -q -O - http://${VIP}/ || echo "request failed"; done`;
const section = (name: string) => `echo "=== ${name}"`;
const status = `grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$ctl/status`;

const script = [
  "set -eu",
  topo.script,
  // The router sends the pool to the LB, as BGP would.
  `${ip} -n router route add 10.1.2.0/24 via ${lb.ip}`,
  // The API link: QEMU's NIC, moved into the LB namespace (its own eth0 is the topology's).
  `${ip} link set ${GUEST_API.nic} name api0`,
  `${ip} link set api0 netns ${lb.ns}`,
  `${ip} -n ${lb.ns} addr add ${GUEST_API.guestAddress} dev api0`,
  `${ip} -n ${lb.ns} link set api0 up`,
  ...controller.sysctls,
  `${controller.command} >/tmp/controller.log 2>&1 &`,
  "ctl=$!",
  awaitServers(3, 240),
  section("security"),
  status,
  `awk '$5 == "/" { print $6 }' /proc/$ctl/mountinfo`,
  section("ipvs"),
  `${ip} netns exec ${lb.ns} ${ipvsadm} -Ln`,
  section("snat-table"),
  `${ip} netns exec ${lb.ns} nft list table ip portable_lb_ipvs`,
  section("nat"),
  get(12),
  section("remove-b1"),
  `echo "${REMOVE_B1}"`,
  awaitServers(2, 120),
  section("ipvs-after"),
  `${ip} netns exec ${lb.ns} ${ipvsadm} -Ln`,
  section("nat-after"),
  get(12),
  section("stop"),
  "kill -TERM $ctl",
  "rc=0; wait $ctl || rc=$?",
  'echo "exit $rc"',
  section("ipvs-kept"),
  `${masqServers}`,
  section("controller-log"),
  "cat /tmp/controller.log",
  section("end"),
].join("\n");

const servedBy = (line: string) => topo.backendIps.find((b) => line.endsWith(backendPage(b))) ?? line;
const sectionOf = (result: IpvsGuestResult, name: string) => guestSection(result.output, name);
/** The controller's JSON log lines (pino). */
const logLines = (result: IpvsGuestResult) =>
  sectionOf(result, "controller-log").flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

describe("the LB controller drives IPVS in the guest (QEMU, real API server)", () => {
  let result: IpvsGuestResult;
  let removal: Promise<unknown> | undefined;

  beforeAll(async () => {
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await core.createNamespacedService({
      namespace: NS,
      body: { ...lbService("web", { ns: NS, class: config.loadBalancerClass }), status: {} },
    });
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: endpoints([b1, b2, b3]) });
    // The guest's kubeconfig: the forwarded address, the certificate checked against a name it has.
    const guestKc = testKubeConfig(`https://${GUEST_API.address}:${GUEST_API.port}`);
    guestKc.clusters = guestKc.clusters.map((c) => ({ ...c, tlsServerName: "kubernetes.default.svc" }));
    const started = Date.now();
    result = await runInIpvsGuest({
      script,
      files: { kubeconfig: guestKc.exportConfig() },
      extra: [
        ...guestNodeEntries(app.files, { programs: GUEST_SETPRIV_PROGRAM, symlinks: app.symlinks }),
        // The config volume's file at its mount path.
        { path: LB_PATHS.configDir.slice(1), type: "dir" },
        { path: LB_PATHS.configFile.slice(1), type: "file", content: JSON.stringify(config) },
      ],
      memoryMib: GUEST_NODE_MEMORY_MIB * 2,
      apiServerPort: Number(new URL(process.env[TEST_ENV.server]!).port),
      onLine: (line) => {
        if (line === REMOVE_B1)
          removal = discovery
            .replaceNamespacedEndpointSlice({ name: "web-1", namespace: NS, body: endpoints([b2, b3]) })
            .catch((err: unknown) => err);
      },
      timeoutMs: 600_000,
    });
    console.log(`IPVS controller guest: ${result.wallMs} ms in QEMU, ${Date.now() - started} ms in all`);
    if (result.exitCode !== 0) throw new Error(`guest script exited ${result.exitCode}:\n${result.output}`);
  }, 660_000);

  afterAll(async () => {
    await core.deleteNamespace({ name: NS }).catch(() => undefined);
  });

  it("runs as the pod spec says: root with NET_ADMIN only, no_new_privs, read-only root", () => {
    const lines = sectionOf(result, "security");
    const field = (name: string) => lines.find((l) => l.startsWith(`${name}:`))?.split(/\s+/)[1];
    const netAdmin = (1n << 12n).toString(16).padStart(16, "0");
    expect({
      uid: field("Uid"),
      gid: field("Gid"),
      eff: field("CapEff"),
      prm: field("CapPrm"),
      bnd: field("CapBnd"),
      inh: field("CapInh"),
      amb: field("CapAmb"),
      nnp: field("NoNewPrivs"),
      root: lines.at(-1)?.split(",")[0],
    }).toEqual({
      uid: "0",
      gid: app.imageConfig.User!.split(":")[1],
      eff: netAdmin,
      prm: netAdmin,
      bnd: netAdmin,
      inh: "0".repeat(16),
      amb: "0".repeat(16),
      nnp: "1",
      root: "ro",
    });
  });

  it("chooses IPVS, allocates the VIP into the Service's status and programs it in NAT mode", async () => {
    expect(logLines(result).find((l) => l.msg === "data plane engine chosen")).toMatchObject({
      engine: "ipvs",
      reason: "forced",
    });
    const svc = await core.readNamespacedServiceStatus({ name: "web", namespace: NS });
    expect(svc.status?.loadBalancer?.ingress?.map((i) => i.ip)).toEqual([VIP]);
    const ipvs = sectionOf(result, "ipvs").join("\n");
    expect(ipvs).toMatch(new RegExp(`TCP  ${VIP.replaceAll(".", "\\.")}:80 mh`));
    for (const b of [b1, b2, b3]) expect(ipvs).toMatch(new RegExp(`-> ${b.replaceAll(".", "\\.")}:80 +Masq`));
    // The masquerade that makes NAT mode work where backends reply by their own route.
    expect(sectionOf(result, "snat-table").join("\n")).toMatch(
      new RegExp(`${VIP.replaceAll(".", "\\.")} \\. (6|tcp) \\. 80`),
    );
  });

  it("serves the VIP from the client namespace through every backend", () => {
    const pages = sectionOf(result, "nat").map(servedBy);
    expect(pages).toHaveLength(12);
    expect(pages.filter((p) => !topo.backendIps.includes(p))).toEqual([]);
    expect(new Set(pages).size).toBeGreaterThan(1);
  });

  it("follows the EndpointSlice: a removed backend leaves IPVS and gets no request", async () => {
    expect(await removal).toMatchObject({ metadata: { name: "web-1" } });
    const ipvs = sectionOf(result, "ipvs-after").join("\n");
    expect(ipvs).not.toContain(`${b1}:80`);
    for (const b of [b2, b3]) expect(ipvs).toMatch(new RegExp(`-> ${b.replaceAll(".", "\\.")}:80 +Masq`));
    const pages = sectionOf(result, "nat-after").map(servedBy);
    expect(pages).toHaveLength(12);
    expect(pages.filter((p) => p !== b2 && p !== b3)).toEqual([]);
  });

  it("exits 0 on SIGTERM and leaves the IPVS service for draining connections", () => {
    expect(sectionOf(result, "stop")).toEqual(["exit 0"]);
    expect(sectionOf(result, "ipvs-kept")).toEqual(["2"]);
  });
});
