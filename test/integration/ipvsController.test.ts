// The real controller drives IPVS, and the real node agent prepares the backends, for direct server
// return in IPVS tunnel mode: the LB image's commands, run as the rendered pod specs run them (config
// file, env, user, capabilities, no_new_privs, read-only root, the pods' sysctls; guestContainer.ts
// says what the guest leaves out), inside the QEMU guest, with dataPlane.engine ipvs and mode dsr.
// Both watch this run's kube-apiserver, each through a NIC of its own on QEMU's restricted user
// networking (GUEST_API). The guest's network is routedTopology.ts's, where backends reply by their
// own route, and its backends are left bare: the node agent, in the router's namespace (the
// backends' node, whose netns directory holds their namespaces), gives them the IPIP decap device,
// the VIP on `lo` and rp_filter. This test makes two Services of type LoadBalancer in its own
// namespace: "web" serves DSR (its backends listen on its port): IPVS tunnels it in IPIP, and the
// backends answer the client from the VIP straight through the router, never through the LB, seeing
// the client's own address; "nat" remaps its port, which DSR cannot, so it falls back to NAT mode,
// which answers only because the controller's IPVS engine masquerades. Then the test removes a
// backend from the EndpointSlices (IPVS follows, the agent undoes that pod) and deletes "web" (the
// agent undoes the others). One guest boot.
// Not here: the BGP speaker (the guest has no BIRD; POD_IP/HOST_IP, which turn the controller's
// speaker control on, are left out).
import { CoordinationV1Api, CoreV1Api, DiscoveryV1Api } from "@kubernetes/client-node";
import { IPIP_DECAP_LABEL, ipipDecapLeaseName } from "../../lb-image/src/common/ipipDecap.ts";
import { LB_PATHS, REQUESTED_VIPS_ANNOTATION, lbConfigSchema } from "@portable-lb/core/config";
import { randomUUID } from "node:crypto";
import { DSR_BACKEND_IPIP_DEVICE } from "../../lb-image/src/dataplane/dsr/dsrTunnel.ts";
import { DSR_FALLBACK_REASONS } from "../../lb-image/src/controller/desiredState.ts";
import { lbService, slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import { nodeAgentPodSpec } from "../../packages/core/src/loadBalancer/nodeAgent.ts";
import { CAP, capMask } from "../harness/capabilities.ts";
import { renderedLbPodSpec } from "../harness/netns/lbPod.ts";
import { backendPage } from "../harness/qemu/guestTopology.ts";
import {
  GUEST_NSENTER_PROGRAM,
  GUEST_SETPRIV_PROGRAM,
  guestContainer,
} from "../harness/qemu/guestContainer.ts";
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
  dataPlane: { engine: "ipvs", mode: "dsr" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const WEB_VIP = "10.1.2.1";
const NAT_VIP = "10.1.2.2";
/** A DSR Service whose source ranges leave the guest's client out. */
const CLOSED_VIP = "10.1.2.3";
const NAT_PORT = 8080;
const NODE = "ipvs-guest";
const topo = routedTopology({ backends: 3, lbs: 1, dsrBackends: "agent" });
const [lb] = topo.lbs as [{ ns: string; ip: string }];
const [b1, b2, b3] = topo.backendIps as [string, string, string];
const [n1, n2, n3] = topo.backends as [string, string, string];
// The backends' node: the router forwards for them, as a node does for its pods.
const AGENT_NS = "router";
const NETNS_DIR = "/var/run/netns";
const KUBECONFIG = "/test/kubeconfig";
const { ip, ipvsadm } = GUEST_PATHS;
/** Lines the script prints when the host should act. */
const REMOVE_B1 = "@@HOST remove-b1";
const DELETE_WEB = "@@HOST delete-web";

const adminKc = testKubeConfig();
const core = adminKc.makeApiClient(CoreV1Api);
const discovery = adminKc.makeApiClient(DiscoveryV1Api);
const endpoints = (service: string, ips: string[]) =>
  slice(
    service,
    ips.map((address) => ({ ip: address, nodeName: NODE })),
    { ns: NS, name: `${service}-1`, port: topo.port },
  );
const service = (name: string, vip: string, port: number, sourceRanges?: string[]) => {
  const svc = lbService(name, {
    ns: NS,
    class: config.loadBalancerClass,
    ports: [{ name: "http", port, protocol: "TCP" }],
    annotations: { [REQUESTED_VIPS_ANNOTATION]: vip },
  });
  return { ...svc, spec: { ...svc.spec, loadBalancerSourceRanges: sourceRanges }, status: {} };
};

const app = guestLbApp();
const apiEnv = { KUBECONFIG };
const controller = guestContainer({
  spec: renderedLbPodSpec(config),
  container: "controller",
  netns: lb.ns,
  fields: {
    "spec.nodeName": NODE,
    "metadata.name": "lb-guest-1",
    "metadata.namespace": NS,
    "metadata.uid": randomUUID(),
  },
  image: app.imageConfig,
  // The test's admin credentials stand in for the ServiceAccount token a cluster mounts.
  env: apiEnv,
  omitEnv: ["POD_IP", "HOST_IP"],
});
const agent = guestContainer({
  spec: nodeAgentPodSpec({
    namespace: NS,
    config,
    configMapName: "cm",
    podAnnotations: {},
    image: "portable-lb",
    nodeSelector: {},
    priorityClassName: "portable-lb-dataplane",
    dsr: { netnsDir: NETNS_DIR },
  }),
  container: "node-agent",
  netns: AGENT_NS,
  fields: { "spec.nodeName": NODE, "metadata.namespace": NS },
  image: app.imageConfig,
  env: apiEnv,
});

const inLb = `${ip} netns exec ${lb.ns}`;
const servers = (vip: string, port: number, method: string) =>
  `${inLb} ${ipvsadm} -Ln -t ${vip}:${port} 2>/dev/null | grep -c ${method} || true`;
const webTunnels = servers(WEB_VIP, topo.port, "Tunnel");
const natMasqs = servers(NAT_VIP, NAT_PORT, "Masq");
const closedTunnels = servers(CLOSED_VIP, topo.port, "Tunnel");
/** Waits (bounded) until `check` holds; exits 92 with both logs if not, or if a process ended. */
const awaitUntil = (what: string, check: string, seconds: number) =>
  `i=0; until ${check}; do i=$((i + 1)); ` +
  `if [ $i -gt ${seconds * 5} ] || ! kill -0 $ctl 2>/dev/null || ! kill -0 $agt 2>/dev/null; then ` +
  `echo "=== failed: never ${what}"; ${inLb} ${ipvsadm} -Ln; cat /tmp/controller.log /tmp/agent.log; exit 92; fi; ` +
  "sleep 0.2; done";
const awaitServers = (web: number, nat: number, seconds: number) =>
  awaitUntil(
    `${web} tunnel and ${nat} NAT servers`,
    `[ "$(${webTunnels})" = ${web} ] && [ "$(${natMasqs})" = ${nat} ]`,
    seconds,
  );
/** The node agent's work in a backend: the IPIP device and the VIP on `lo`. */
const prepared = (ns: string) =>
  `${ip} -n ${ns} link show ${DSR_BACKEND_IPIP_DEVICE} >/dev/null 2>&1 && ${ip} -n ${ns} addr show dev lo | grep -q ' ${WEB_VIP}/32'`;
const bare = (ns: string) =>
  `! ${ip} -n ${ns} link show ${DSR_BACKEND_IPIP_DEVICE} >/dev/null 2>&1 && ! ${ip} -n ${ns} addr show dev lo | grep -q ' ${WEB_VIP}/32'`;
const backendState = (ns: string) => [
  `echo "-- ${ns}"`,
  `${ip} -n ${ns} -d link show ${DSR_BACKEND_IPIP_DEVICE} 2>&1 || true`,
  `${ip} -n ${ns} -4 addr show dev lo`,
  `echo "rp_filter $(${ip} netns exec ${ns} sysctl -n net.ipv4.conf.all.rp_filter) $(${ip} netns exec ${ns} sysctl -n net.ipv4.conf.${DSR_BACKEND_IPIP_DEVICE}.rp_filter 2>/dev/null || echo none)"`,
];
const client = `${ip} netns exec client`;
// mh hashes each request's random source port: with 12 requests one of the three backends got none
// about once in 43 runs (3 × (2/3)^12); with 30, about once in 60,000.
const DSR_REQUESTS = 30;
const get = (url: string, n: number) =>
  `for i in $(seq ${n}); do ${client} timeout 5 wget -q -O - ${url} || echo "request failed"; done`;
const section = (name: string) => `echo "=== ${name}"`;
const status = (pid: string) =>
  `grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/${pid}/status`;
// Where replies pass: the LB's prerouting sees every packet that comes back through it, the router's
// forward every packet between the hosts. Replies from the DSR VIP must pass the router only; the
// NAT service's replies (from the backends' own addresses) come back through the LB, as the control.
const observe = (ns: string, hook: string) =>
  [
    `add table ip observe`,
    `add chain ip observe c { type filter hook ${hook} priority -400 ; }`,
    `add rule ip observe c ip saddr ${WEB_VIP} counter`,
    `add rule ip observe c ip saddr 10.3.0.0/16 tcp sport ${topo.port} counter`,
  ]
    .map((c) => `${ip} netns exec ${ns} nft '${c}'`)
    .join("\n");

const script = [
  "set -eu",
  topo.script,
  // The router sends the pool to the LB, as BGP would.
  `${ip} -n router route add 10.1.2.0/24 via ${lb.ip}`,
  // The API links: QEMU's NICs, one moved into the LB namespace, one into the node agent's.
  ...[lb.ns, AGENT_NS].flatMap((ns, i) => [
    `${ip} link set eth${i} name api${i}`,
    `${ip} link set api${i} netns ${ns}`,
    `${ip} -n ${ns} addr add ${GUEST_API.guestAddress} dev api${i}`,
    `${ip} -n ${ns} link set api${i} up`,
  ]),
  // The node agent's volume: the node's /proc/sys/net, writable (its netns directory is the guest's).
  `mkdir -p ${LB_PATHS.hostProcSysNet}`,
  `mount --bind /proc/sys/net ${LB_PATHS.hostProcSysNet}`,
  ...controller.sysctls,
  `${controller.command} >/tmp/controller.log 2>&1 &`,
  "ctl=$!",
  `${agent.command} >/tmp/agent.log 2>&1 &`,
  "agt=$!",
  awaitServers(3, 3, 300),
  awaitUntil("2 tunnel servers for the closed VIP", `[ "$(${closedTunnels})" = 2 ]`, 60),
  awaitUntil("prepared backends", [n1, n2, n3].map(prepared).join(" && "), 120),
  observe(lb.ns, "prerouting"),
  observe(AGENT_NS, "forward"),
  section("security"),
  status("$ctl"),
  `awk '$5 == "/" { print $6 }' /proc/$ctl/mountinfo`,
  section("agent-security"),
  status("$agt"),
  section("ipvs"),
  `${inLb} ${ipvsadm} -Ln`,
  section("snat-table"),
  `${inLb} nft list table ip portable_lb_ipvs`,
  section("backends"),
  ...[n1, n2, n3].flatMap(backendState),
  section("dsr"),
  get(`http://${WEB_VIP}/cgi-bin/client`, DSR_REQUESTS),
  section("nat"),
  get(`http://${NAT_VIP}:${NAT_PORT}/`, 12),
  section("closed"),
  `for i in 1 2 3; do ${client} timeout 2 wget -q -O - http://${CLOSED_VIP}/ || echo "request failed"; done`,
  section("firewall"),
  `${inLb} nft list table ip portable_lb_firewall`,
  section("lb-counters"),
  `${inLb} nft list chain ip observe c`,
  section("router-counters"),
  `${ip} netns exec ${AGENT_NS} nft list chain ip observe c`,
  section("remove-b1"),
  `echo "${REMOVE_B1}"`,
  awaitServers(2, 2, 120),
  awaitUntil("b1 undone", bare(n1), 60),
  section("ipvs-after"),
  `${inLb} ${ipvsadm} -Ln`,
  section("b1-after"),
  ...backendState(n1),
  section("dsr-after"),
  get(`http://${WEB_VIP}/cgi-bin/client`, 12),
  section("nat-after"),
  get(`http://${NAT_VIP}:${NAT_PORT}/`, 12),
  section("delete-web"),
  `echo "${DELETE_WEB}"`,
  awaitUntil("web and closed gone", `[ "$(${webTunnels})" = 0 ] && [ "$(${closedTunnels})" = 0 ]`, 120),
  awaitUntil("b2 and b3 undone", `${bare(n2)} && ${bare(n3)}`, 60),
  section("backends-after"),
  ...[n2, n3].flatMap(backendState),
  section("stop"),
  "kill -TERM $ctl $agt",
  "rc=0; wait $ctl || rc=$?",
  "arc=0; wait $agt || arc=$?",
  'echo "exit $rc $arc"',
  section("ipvs-kept"),
  natMasqs,
  section("controller-log"),
  "cat /tmp/controller.log",
  section("agent-log"),
  "cat /tmp/agent.log",
  section("end"),
].join("\n");

const servedBy = (line: string) => topo.backendIps.find((b) => line.endsWith(backendPage(b))) ?? line;
const sectionOf = (result: IpvsGuestResult, name: string) => guestSection(result.output, name);
/** A process's JSON log lines (pino). */
const logLines = (result: IpvsGuestResult, name: string) =>
  sectionOf(result, name).flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
/** What backendState printed, per backend namespace. */
const perBackend = (lines: string[]) => {
  const state = new Map<string, string>();
  let ns = "";
  for (const l of lines)
    if (l.startsWith("-- ")) state.set((ns = l.slice(3)), "");
    else state.set(ns, `${state.get(ns) ?? ""}${l}\n`);
  return state;
};
/**
 * "CLIENT at BACKEND" answers of /cgi-bin/client (busybox httpd listens on IPv6 and names an IPv4
 * client by its mapped address, [::ffff:A.B.C.D]).
 */
const answers = (result: IpvsGuestResult, name: string) =>
  sectionOf(result, name).map((l) => {
    const [from = "", , backend] = l.split(" ");
    return { from: from.replace(/^\[::ffff:(.*)\]$/, "$1"), backend };
  });
/** Packets the observation chain counted: [from the DSR VIP, from a backend's port]. */
const counters = (result: IpvsGuestResult, name: string) =>
  sectionOf(result, name).flatMap((l) => {
    const m = /counter packets (\d+)/.exec(l);
    return m ? [Number(m[1])] : [];
  });
const re = (text: string) => new RegExp(text.replaceAll(".", "\\."));

describe("the LB controller and node agent serve DSR through IPVS tunnel mode in the guest (QEMU, real API server)", () => {
  let result: IpvsGuestResult;
  const hostSteps: Promise<unknown>[] = [];

  beforeAll(async () => {
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await core.createNamespacedService({ namespace: NS, body: service("web", WEB_VIP, topo.port) });
    await core.createNamespacedService({ namespace: NS, body: service("nat", NAT_VIP, NAT_PORT) });
    await core.createNamespacedService({
      namespace: NS,
      body: service("closed", CLOSED_VIP, topo.port, ["192.0.2.0/24"]),
    });
    for (const name of ["web", "nat"])
      await discovery.createNamespacedEndpointSlice({ namespace: NS, body: endpoints(name, [b1, b2, b3]) });
    // Not on b1, which the test removes from the others' slices and expects undone.
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: endpoints("closed", [b2, b3]) });
    // The guest's kubeconfig: the forwarded address, the certificate checked against a name it has.
    const guestKc = testKubeConfig(`https://${GUEST_API.address}:${GUEST_API.port}`);
    guestKc.clusters = guestKc.clusters.map((c) => ({ ...c, tlsServerName: "kubernetes.default.svc" }));
    const started = Date.now();
    result = await runInIpvsGuest({
      script,
      files: { kubeconfig: guestKc.exportConfig() },
      extra: [
        ...guestNodeEntries(app.files, {
          programs: { ...GUEST_SETPRIV_PROGRAM, ...GUEST_NSENTER_PROGRAM },
          symlinks: app.symlinks,
        }),
        // The config volume's file at its mount path.
        { path: LB_PATHS.configDir.slice(1), type: "dir" },
        { path: LB_PATHS.configFile.slice(1), type: "file", content: JSON.stringify(config) },
      ],
      memoryMib: GUEST_NODE_MEMORY_MIB * 2,
      apiServerPort: Number(new URL(process.env[TEST_ENV.server]!).port),
      apiLinks: 2,
      onLine: (line) => {
        const step =
          line === REMOVE_B1
            ? Promise.all(
                ["web", "nat"].map((name) =>
                  discovery.replaceNamespacedEndpointSlice({
                    name: `${name}-1`,
                    namespace: NS,
                    body: endpoints(name, [b2, b3]),
                  }),
                ),
              )
            : line === DELETE_WEB
              ? Promise.all(
                  ["web", "closed"].map((name) => core.deleteNamespacedService({ name, namespace: NS })),
                )
              : undefined;
        if (step) hostSteps.push(step.catch((err: unknown) => err));
      },
      timeoutMs: 780_000,
    });
    console.log(`IPVS controller guest: ${result.wallMs} ms in QEMU, ${Date.now() - started} ms in all`);
    if (result.exitCode !== 0) throw new Error(`guest script exited ${result.exitCode}:\n${result.output}`);
  }, 840_000);

  afterAll(async () => {
    await core.deleteNamespace({ name: NS }).catch(() => undefined);
  });

  it("runs both as their pod specs say: root with only their capabilities, no_new_privs, read-only root", () => {
    const fields = (name: string) => {
      const lines = sectionOf(result, name);
      const field = (f: string) => lines.find((l) => l.startsWith(`${f}:`))?.split(/\s+/)[1];
      return {
        uid: field("Uid"),
        eff: field("CapEff"),
        prm: field("CapPrm"),
        bnd: field("CapBnd"),
        inh: field("CapInh"),
        amb: field("CapAmb"),
        nnp: field("NoNewPrivs"),
      };
    };
    const expected = (caps: string) => ({
      uid: "0",
      eff: caps,
      prm: caps,
      bnd: caps,
      inh: "0".repeat(16),
      amb: "0".repeat(16),
      nnp: "1",
    });
    expect(fields("security")).toEqual(expected(capMask(CAP.NET_ADMIN)));
    expect(sectionOf(result, "security").at(-1)?.split(",")[0]).toBe("ro");
    expect(fields("agent-security")).toEqual(expected(capMask(CAP.NET_ADMIN, CAP.SYS_ADMIN)));
  });

  it("chooses IPVS and programs DSR in tunnel mode with mh, the remapped port in NAT mode", async () => {
    expect(
      logLines(result, "controller-log").find((l) => l.msg === "data plane engine chosen"),
    ).toMatchObject({
      engine: "ipvs",
      reason: "forced",
    });
    for (const [name, vip] of [["nat", NAT_VIP]] as const) {
      const svc = await core.readNamespacedServiceStatus({ name, namespace: NS });
      expect(svc.status?.loadBalancer?.ingress?.map((i) => i.ip)).toEqual([vip]);
    }
    const ipvs = sectionOf(result, "ipvs").join("\n");
    expect(ipvs).toMatch(re(`TCP  ${WEB_VIP}:80 mh`));
    expect(ipvs).toMatch(re(`TCP  ${NAT_VIP}:${NAT_PORT} mh`));
    for (const b of [b1, b2, b3]) {
      expect(ipvs).toMatch(new RegExp(`-> ${re(b).source}:80 +Tunnel`));
      expect(ipvs).toMatch(new RegExp(`-> ${re(b).source}:80 +Masq`));
    }
    // Only the NAT service is masqueraded.
    const table = sectionOf(result, "snat-table").join("\n");
    expect(table).toMatch(re(`${NAT_VIP} . `));
    expect(table).not.toContain(WEB_VIP);
    // The port DSR cannot serve is told on its Service.
    const events = await core.listNamespacedEvent({ namespace: NS });
    expect(events.items.filter((e) => e.involvedObject.name === "nat").map((e) => e.reason)).toContain(
      DSR_FALLBACK_REASONS[0],
    );
    // The node agent found ipip in the guest's kernel and said so in its node's Lease, which the
    // controller watches: "web" stayed in tunnel mode (above).
    const lease = await adminKc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: ipipDecapLeaseName(NODE), namespace: NS });
    expect(lease.metadata?.labels?.[IPIP_DECAP_LABEL]).toBe("true");
    expect(lease.spec?.holderIdentity).toBe(NODE);
  });

  it("has the node agent prepare every backend: IPIP decap device up, the VIP on lo, rp_filter off", () => {
    const state = perBackend(sectionOf(result, "backends"));
    expect([...state.keys()]).toEqual([n1, n2, n3]);
    for (const text of state.values()) {
      expect(text).toMatch(new RegExp(`${DSR_BACKEND_IPIP_DEVICE}(@\\S+)?: <[^>]*\\bUP\\b`));
      expect(text).toMatch(/\bipip\b.*\bexternal\b/);
      expect(text).toMatch(re(`inet ${WEB_VIP}/32 scope global lo:plb-dsr`));
      expect(text).toMatch(/^rp_filter 0 0$/m);
    }
  });

  it("serves DSR: every backend answers, seeing the client's own address, and replies bypass the LB", () => {
    const got = answers(result, "dsr");
    expect(got).toHaveLength(DSR_REQUESTS);
    expect(got.filter((a) => a.from !== topo.clientIp)).toEqual([]);
    expect(new Set(got.map((a) => a.backend))).toEqual(new Set([b1, b2, b3]));
    const [lbFromVip, lbFromBackends] = counters(result, "lb-counters");
    const [routerFromVip] = counters(result, "router-counters");
    // Replies from the VIP passed the router (from the backends) and never the LB...
    expect(lbFromVip).toBe(0);
    expect(routerFromVip).toBeGreaterThanOrEqual(DSR_REQUESTS);
    // ...while the NAT service's replies came back through it, as the control shows.
    expect(lbFromBackends).toBeGreaterThan(0);
    console.log(
      `packets from the DSR VIP: ${routerFromVip} through the router, ${lbFromVip} through the LB; NAT replies through the LB: ${lbFromBackends}`,
    );
  });

  it("drops, before IPVS, every packet to a Service from outside its source ranges", () => {
    // Each request timed out (busybox's timeout says "Terminated"): dropped, not refused.
    expect(sectionOf(result, "closed")).toEqual(Array(3).fill(["Terminated", "request failed"]).flat());
    const table = sectionOf(result, "firewall").join("\n");
    // (The guest's nft names protocols by number.)
    expect(table).toMatch(re(`${CLOSED_VIP} . 6 . ${topo.port} . 192.0.2.0/24`));
    expect(table).not.toContain(WEB_VIP);
    expect(table).toMatch(/saddr != @allowed counter packets [1-9]\d* bytes \d+ drop/);
  });

  it("serves the remapped port in NAT mode through every backend, masqueraded", () => {
    const pages = sectionOf(result, "nat").map(servedBy);
    expect(pages).toHaveLength(12);
    expect(pages.filter((p) => !topo.backendIps.includes(p))).toEqual([]);
    expect(new Set(pages).size).toBeGreaterThan(1);
  });

  it("follows the EndpointSlices: a removed backend leaves IPVS, gets no request, and its pod is undone", async () => {
    expect(await hostSteps[0]).toHaveLength(2);
    const ipvs = sectionOf(result, "ipvs-after").join("\n");
    expect(ipvs).not.toContain(`${b1}:80`);
    for (const b of [b2, b3]) expect(ipvs).toMatch(new RegExp(`-> ${re(b).source}:80 +Tunnel`));
    const b1State = perBackend(sectionOf(result, "b1-after")).get(n1);
    expect(b1State).not.toContain(WEB_VIP);
    expect(b1State).toMatch(/does not exist/);
    const got = answers(result, "dsr-after");
    expect(got).toHaveLength(12);
    expect(got.filter((a) => a.from !== topo.clientIp || (a.backend !== b2 && a.backend !== b3))).toEqual([]);
    const pages = sectionOf(result, "nat-after").map(servedBy);
    expect(pages.filter((p) => p !== b2 && p !== b3)).toEqual([]);
  });

  it("undoes the backends' state when the DSR Services go", async () => {
    expect(await hostSteps[1]).toMatchObject([
      { metadata: { name: "web" } },
      { metadata: { name: "closed" } },
    ]);
    const state = perBackend(sectionOf(result, "backends-after"));
    expect([...state.keys()]).toEqual([n2, n3]);
    for (const text of state.values()) {
      expect(text).not.toContain(WEB_VIP);
      expect(text).toMatch(/does not exist/);
    }
  });

  it("exits 0 on SIGTERM (both) and leaves the IPVS service for draining connections", () => {
    expect(sectionOf(result, "stop")).toEqual(["exit 0 0"]);
    expect(sectionOf(result, "ipvs-kept")).toEqual(["2"]);
  });
});
