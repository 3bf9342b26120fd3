// VIP ownership against the run's kube-apiserver (issue 13): a request for another Service's VIP,
// in both directions, moves nothing; a Service that requested nothing is never renumbered; the
// users are told through Events that `kubectl describe` shows. The real controller programs
// nftables in a network namespace (client -> LB -> one backend per Service, answering with its
// name), so the test also sees every VIP keep answering from its own Service's backend. A watch
// records every status the API server holds, so a move and its return would not go unseen.
import { CoreV1Api, DiscoveryV1Api, Watch, type V1Service } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import type { RunningController } from "../../lb-image/src/controller/controller.ts";
import { slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import type { LabNamespace, NetnsLab } from "@portable-lb/lab";
import { describeEvents } from "../harness/describeEvents.ts";
import { gatewayLab, spreadOver } from "../harness/netns/gatewayLab.ts";
import { startNetnsController } from "../harness/netns/netnsController.ts";
import { settle } from "../harness/settle.ts";
import { testKubeConfig } from "../harness/testEnv.ts";

const NS = `vipown-${process.pid}`;
const REQUEST = "portable-lb.io/load-balancer-ips";
const config = lbConfigSchema.parse({
  // Its own class: the other tests' controllers, watching the same API server, leave it alone.
  loadBalancerClass: "portable-lb.io/vipown",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
// Each Service has its own backend, so an answer names the Service a VIP reached.
const SERVICES = [
  { name: "old", backend: { name: "b-old", ip: "10.244.0.11" }, vip: "10.1.1.1" },
  { name: "young", backend: { name: "b-young", ip: "10.244.0.12" }, vip: "10.1.1.2" },
  { name: "third", backend: { name: "b-third", ip: "10.244.0.13" }, vip: "10.1.1.3" },
];

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const discovery = kc.makeApiClient(DiscoveryV1Api);
let lab: NetnsLab;
let client: LabNamespace;
let lbNs: LabNamespace;
let controller: RunningController | undefined;
let watch: AbortController | undefined;
let watchEnded: unknown;
/** Every distinct status each Service had, in order, as the watch saw them. */
const history = new Map<string, string[]>();
/** The Services the watch saw being deleted (deletionTimestamp set, the object still there). */
const lingered = new Set<string>();

const vipsOf = (svc: V1Service) => (svc.status?.loadBalancer?.ingress ?? []).map((i) => i.ip).join(",");
const read = (name: string) => core.readNamespacedService({ name, namespace: NS });

/** Read, change, replace; again on a 409 (the controller writes statuses meanwhile). */
async function annotate(name: string, value: string | undefined): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const svc = await read(name);
    const annotations = { ...svc.metadata!.annotations };
    if (value === undefined) delete annotations[REQUEST];
    else annotations[REQUEST] = value;
    try {
      await core.replaceNamespacedService({
        name,
        namespace: NS,
        body: { ...svc, metadata: { ...svc.metadata, annotations } },
      });
      return;
    } catch (err) {
      if (attempt >= 5 || (err as { code?: number }).code !== 409) throw err;
    }
  }
}

/** The Events `kubectl describe service NAME` lists, as "Type Reason: message". */
async function described(name: string): Promise<string[]> {
  return (await describeEvents(core, "Service", await read(name))).map(
    (e) => `${e.type} ${e.reason}: ${e.message}`,
  );
}

/** Each VIP answers 20 new connections, all from its own Service's backend. */
async function everyVipAnswers(vips: Record<string, string>): Promise<void> {
  for (const [name, vip] of Object.entries(vips)) {
    const { counts, failures } = await spreadOver(client, `http://${vip}/`, 20);
    expect({ vip, failures, answeredBy: Object.keys(counts) }).toEqual({
      vip,
      failures: 0,
      answeredBy: [SERVICES.find((s) => s.name === name)!.backend.name],
    });
  }
}

beforeAll(async () => {
  ({
    lab,
    client,
    gateway: lbNs,
  } = await gatewayLab("vipown", {
    gateway: "lb",
    clientNet: "10.10.0",
    bridge: { name: "pods", address: "10.244.0.1/24" },
    hosts: SERVICES.map((s) => s.backend),
  }));
  await core.createNamespace({ body: { metadata: { name: NS } } });
  // From a list's resourceVersion, as an informer starts: the watch then misses nothing.
  const listed = await core.listNamespacedService({ namespace: NS });
  watch = await new Watch(kc).watch(
    `/api/v1/namespaces/${NS}/services`,
    { resourceVersion: listed.metadata!.resourceVersion },
    (phase, svc: V1Service) => {
      if (phase === "ERROR") watchEnded ??= svc;
      if (phase === "MODIFIED" && svc.metadata?.deletionTimestamp) lingered.add(svc.metadata.name!);
      const seen = history.get(svc.metadata!.name!) ?? [];
      if (seen.at(-1) !== vipsOf(svc)) history.set(svc.metadata!.name!, [...seen, vipsOf(svc)]);
    },
    (err: unknown) => (watchEnded ??= err ?? "the watch ended"),
  );
  controller = await startNetnsController({ config, kubeconfig: kc, namespace: NS, pod: lbNs });
});

afterAll(async () => {
  watch?.abort();
  await controller?.stop();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  await lab?.destroy();
});

describe("VIP ownership through the API server", () => {
  it("allocates the lowest free VIP to each new Service and says so where kubectl describe looks", async () => {
    // One after another: each takes the lowest free address.
    for (const s of SERVICES) {
      await core.createNamespacedService({
        namespace: NS,
        body: {
          metadata: { name: s.name },
          spec: {
            type: "LoadBalancer",
            loadBalancerClass: config.loadBalancerClass,
            allocateLoadBalancerNodePorts: false,
            ports: [{ name: "http", port: 80, protocol: "TCP" }],
          },
        },
      });
      await discovery.createNamespacedEndpointSlice({
        namespace: NS,
        body: slice(s.name, [s.backend], { ns: NS, name: s.name }),
      });
      await settle(async () => vipsOf(await read(s.name)) === s.vip);
    }
    for (const s of SERVICES)
      await settle(async () =>
        (await described(s.name)).includes(
          `Normal VipAllocated: VIP ${s.vip} allocated: the lowest free address of pool web`,
        ),
      );
    await settle(async () => (await spreadOver(client, `http://${SERVICES[2]!.vip}/`, 5)).failures === 0);
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.2", third: "10.1.1.3" });
  });

  it("an older Service asking for a younger one's VIP waits, told who holds it; nothing moves", async () => {
    await annotate("old", "10.1.1.2");
    await settle(async () =>
      (await described("old")).includes(
        `Warning VipInUse: VIP 10.1.1.2 belongs to ${NS}/young; this request waits until ${NS}/young gives it up (is deleted, or requests other addresses in ${REQUEST}), or change this Service's request to a free address; ${NS}/old keeps 10.1.1.1 meanwhile`,
      ),
    );
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.2", third: "10.1.1.3" });
  });

  it("a younger Service asking for an older one's VIP waits too", async () => {
    await annotate("old", undefined); // old keeps 10.1.1.1: dropping a request moves nothing
    await annotate("young", "10.1.1.1");
    await settle(async () =>
      (await described("young")).some((e) =>
        e.startsWith(`Warning VipInUse: VIP 10.1.1.1 belongs to ${NS}/old; `),
      ),
    );
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.2", third: "10.1.1.3" });
  });

  it("a request for a free VIP moves its Service there and says from where, and only that Service", async () => {
    await annotate("young", "10.1.1.20");
    await settle(async () => vipsOf(await read("young")) === "10.1.1.20");
    await settle(async () =>
      (await described("young")).includes(
        `Normal VipChanged: VIP changed from 10.1.1.2 to 10.1.1.20: the Service requests it in ${REQUEST}`,
      ),
    );
    await settle(async () => (await spreadOver(client, "http://10.1.1.20/", 5)).failures === 0);
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.20", third: "10.1.1.3" });
    // Every status each Service ever had, as the API server held it: none moved but young, once.
    expect(watchEnded).toBeUndefined();
    expect(Object.fromEntries(history)).toEqual({
      old: ["", "10.1.1.1"],
      young: ["", "10.1.1.2", "10.1.1.20"],
      third: ["", "10.1.1.3"],
    });
  });

  it("writes back a status someone changed to ipMode VIP (kube-proxy would bypass the LBs), and says so", async () => {
    const svc = await read("third");
    const ingress = [{ ip: "10.1.1.3", ipMode: "VIP" }];
    await core.replaceNamespacedServiceStatus({
      name: "third",
      namespace: NS,
      body: { ...svc, status: { loadBalancer: { ingress } } },
    });
    await settle(async () => {
      const now = (await read("third")).status?.loadBalancer?.ingress;
      return JSON.stringify(now) === JSON.stringify([{ ip: "10.1.1.3", ipMode: "Proxy" }]);
    });
    await settle(async () =>
      (await described("third")).some((e) =>
        e.startsWith("Normal VipStatusRepaired: status.loadBalancer.ingress for 10.1.1.3 written back"),
      ),
    );
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.20", third: "10.1.1.3" });
  });

  it("keeps the cleanup finalizer: released on a type change and on deletion, which waits for it", async () => {
    const FINALIZER = "service.kubernetes.io/load-balancer-cleanup";
    // Ours: the finalizer, and our class as its owner (another class's controller leaves it alone).
    const finalized = async (name: string) => {
      const { metadata } = await read(name);
      return (
        metadata?.finalizers?.includes(FINALIZER) === true &&
        metadata.annotations?.["portable-lb.io/cleanup-finalizer-owner"] === config.loadBalancerClass
      );
    };
    // Away from LoadBalancer, the API server drops the fields of that type (class, node ports).
    const retype = async (type: "ClusterIP" | "LoadBalancer") => {
      const svc = await read("third");
      const lb = type === "LoadBalancer" && {
        loadBalancerClass: config.loadBalancerClass,
        allocateLoadBalancerNodePorts: false,
      };
      await core.replaceNamespacedService({
        name: "third",
        namespace: NS,
        body: { ...svc, spec: { ...svc.spec, type, ...lb } },
      });
    };
    await settle(() => finalized("third"));
    // ClusterIP: the status cleared (by the API server), the finalizer removed; the VIP no longer answers.
    await retype("ClusterIP");
    await settle(async () => vipsOf(await read("third")) === "" && !(await finalized("third")));
    await settle(async () =>
      (await described("third")).some((e) =>
        e.startsWith(
          "Normal VipReleased: VIP released (the Service is no longer one portable-lb serves (type ClusterIP",
        ),
      ),
    );
    await settle(async () => (await spreadOver(client, "http://10.1.1.3/", 5)).failures === 5);
    // LoadBalancer again: the lowest free VIP (.2, which young gave up) and the finalizer; it answers.
    await retype("LoadBalancer");
    await settle(
      async () => vipsOf(await read("third")) === "10.1.1.2" && (await finalized("third")) === true,
    );
    await settle(async () => (await spreadOver(client, "http://10.1.1.2/", 5)).failures === 0);
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.20", third: "10.1.1.2" });
    // Deleted: the object stays until its VIP is released, then goes; the others keep serving.
    await core.deleteNamespacedService({ name: "third", namespace: NS });
    await settle(async () =>
      read("third").then(
        () => false,
        (err: { code?: number }) => err.code === 404,
      ),
    );
    await settle(async () => (await spreadOver(client, "http://10.1.1.2/", 5)).failures === 5);
    await everyVipAnswers({ old: "10.1.1.1", young: "10.1.1.20" });
    expect(watchEnded).toBeUndefined();
    expect(history.get("third")).toEqual(["", "10.1.1.3", "", "10.1.1.2"]);
    expect(lingered).toEqual(new Set(["third"]));
  });

  it("tells a LoadBalancer Service without a class how to get portable-lb, and leaves it alone", async () => {
    await core.createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: "classless" },
        spec: { type: "LoadBalancer", allocateLoadBalancerNodePorts: false, ports: [{ port: 80 }] },
      },
    });
    await settle(async () =>
      (await described("classless")).includes(
        `Normal NoLoadBalancerClass: portable-lb serves only Services with spec.loadBalancerClass: ${config.loadBalancerClass}; this one has no class, so it is left to the cluster's default load balancer, if there is one. To have portable-lb serve it, delete it and create it again with that class (the class cannot be set or changed on an existing Service), or, where no other load balancer runs, set loadBalancer.serveClassless: true to make portable-lb the cluster's default.`,
      ),
    );
    expect(vipsOf(await read("classless"))).toBe("");
    expect(history.get("classless")).toEqual([""]);
  });
});
