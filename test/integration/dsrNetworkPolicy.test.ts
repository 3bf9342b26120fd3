// Direct server return and NetworkPolicies, with the run's kube-apiserver and the real controller
// programming nftables in a network namespace: a policy that selects a DSR Service's backends and
// does not admit the tunnel (UDP 4789 from the LB pods) has the port served by SNAT, with an Event
// on the Service naming the policy and the fix; once the policy admits the tunnel, DSR comes back.
// The policy is there before the controller starts (read by its list) and then changed (read from
// its watch), since the two deliver a rule's `from` in different shapes.
import { CoreV1Api, NetworkingV1Api } from "@kubernetes/client-node";
import { NetnsLab, type LabNamespace } from "@portable-lb/lab";
import { lbConfigSchema } from "@portable-lb/core/config";
import type { RunningController } from "../../lb-image/src/controller/controller.ts";
import { NFT_TABLE } from "../../lb-image/src/dataplane/nft/nftState.ts";
import { describeEvents } from "../harness/describeEvents.ts";
import { createLbService } from "../harness/lbServices.ts";
import { startNetnsController } from "../harness/netns/netnsController.ts";
import {
  POLICY_NAME,
  lbPodsPeer,
  namespacePeer,
  replaceTunnelPolicy,
  tunnelPolicy,
} from "../harness/networkPolicies.ts";
import { settle } from "../harness/settle.ts";
import { testKubeConfig } from "../harness/testEnv.ts";

const LB_NS = `dsrnp-lb-${process.pid}`;
const APP_NS = `dsrnp-${process.pid}`;
// A class of its own: integration tests share one API server, and every class has its own allocator.
const config = lbConfigSchema.parse({
  loadBalancerClass: "portable-lb.io/dsrnp",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.3.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "nftables", mode: "dsr" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const VIP = "10.1.3.1";

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const networking = kc.makeApiClient(NetworkingV1Api);

let lab: NetnsLab;
let lbPod: LabNamespace;
let controller: RunningController | undefined;

/** How the LB pod's kernel forwards VIP:80: which of the engine's dispatch maps holds it. */
async function forwardingInKernel(): Promise<"dsr" | "snat" | undefined> {
  const list = async (map: string) =>
    (await lbPod.exec("nft", ["list", "map", "ip", NFT_TABLE, map])).stdout.includes(VIP);
  if (await list("dsr_services")) return "dsr";
  if (await list("services")) return "snat";
  return undefined;
}

async function fallbackPorts(): Promise<string> {
  return controller!.metrics.registry.getSingleMetricAsString("portable_lb_dsr_fallback_ports");
}

beforeAll(async () => {
  lab = await NetnsLab.create("dsrnp");
  lbPod = await lab.namespace("lb", { forwarding: true });
  for (const name of [LB_NS, APP_NS]) await core.createNamespace({ body: { metadata: { name } } });
  // DSR needs the backends on the Service's own port (80).
  await createLbService(kc, APP_NS, "web", config.loadBalancerClass, [{ ip: "10.244.1.5" }], {
    port: 80,
    selector: { app: "web" },
  });
  // Admits the tunnel from another namespace only: listed so by the controller's first list.
  await networking.createNamespacedNetworkPolicy({
    namespace: APP_NS,
    body: tunnelPolicy(APP_NS, [namespacePeer("elsewhere")]),
  });
  controller = await startNetnsController({ config, kubeconfig: kc, namespace: LB_NS, pod: lbPod });
});

afterAll(async () => {
  await controller?.stop();
  for (const name of [APP_NS, LB_NS]) await core.deleteNamespace({ name }).catch(() => undefined);
  await lab?.destroy();
});

describe("DSR and NetworkPolicies", () => {
  it("serves by SNAT a port whose backends a policy keeps the tunnel from, with an Event saying the fix", async () => {
    await settle(async () => (await forwardingInKernel()) === "snat");
    const svc = await core.readNamespacedService({ name: "web", namespace: APP_NS });
    await settle(async () =>
      (await describeEvents(core, "Service", svc)).some(
        (e) => e.reason === "DirectServerReturnBlockedByNetworkPolicy",
      ),
    );
    const event = (await describeEvents(core, "Service", svc)).find(
      (e) => e.reason === "DirectServerReturnBlockedByNetworkPolicy",
    );
    expect(event).toMatchObject({ type: "Warning" });
    expect(event!.message).toContain(`port http: NetworkPolicy ${APP_NS}/web-ingress selects its backends`);
    expect(event!.message).toContain(
      `{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"${LB_NS}"}},"podSelector":{"matchLabels":{"app":"portable-lb-controller"}}}],"ports":[{"protocol":"UDP","port":4789}]}`,
    );
    expect(await fallbackPorts()).toMatch(
      /portable_lb_dsr_fallback_ports\{reason="DirectServerReturnBlockedByNetworkPolicy"\} 1/,
    );
  });

  it("serves it by DSR again once the policy admits the tunnel from the LB pods", async () => {
    await replaceTunnelPolicy(networking, APP_NS, [lbPodsPeer(LB_NS)]);
    await settle(async () => (await forwardingInKernel()) === "dsr");
    expect(await fallbackPorts()).toMatch(
      /portable_lb_dsr_fallback_ports\{reason="DirectServerReturnBlockedByNetworkPolicy"\} 0/,
    );
  });

  it("follows the policy's changes from the watch: a rule for other pods only falls back again", async () => {
    // A podSelector alone picks pods of the policy's own namespace: not the LB pods.
    await replaceTunnelPolicy(networking, APP_NS, [
      { podSelector: { matchLabels: { app: "portable-lb-controller" } } },
    ]);
    await settle(async () => (await forwardingInKernel()) === "snat");
    // Deleting the policy leaves nothing restricting the backends.
    await networking.deleteNamespacedNetworkPolicy({ name: POLICY_NAME, namespace: APP_NS });
    await settle(async () => (await forwardingInKernel()) === "dsr");
  });
});
