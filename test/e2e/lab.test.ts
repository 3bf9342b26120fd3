// The lab end to end, through the real Pulumi engine and the root program, as `npm run lab` runs it
// (but in a stack and namespaces of its own, so a developer's lab is left alone): up → the demo
// VIP answers, the router has one ECMP next hop per LB node, requests spread over LB nodes and
// backends, a Service made with `kubectl expose` is served too, BFD is Up between the router, the reflectors and every LB speaker (their pods run by
// the lab nodes' real kubelets, from the images we build) → a second up changes nothing
// → LB pods 3 → 1 → 3, the route following → destroy, leaving no namespace, process or folder behind.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { RR_PATHS } from "@portable-lb/core";
import { BIRD_RUN_FILES, LB_PATHS } from "@portable-lb/core/config";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { load } from "js-yaml";
import {
  cgroupPids,
  controlPlaneDir,
  curlSpread,
  execCommand,
  labDir,
  labNamespace,
  labNodeLayout,
  type LabPlan,
  routerNextHops,
  waitUntil,
} from "@portable-lb/lab";
import { containerPid } from "../harness/lab/labPods.ts";
import { TestStack } from "../harness/testStack.ts";
import { describeLabFaults } from "./labFaults.ts";
import { parseBirdBfdSessions, parseFrrBfdPeers, upPeers } from "../harness/bfdSessions.ts";

const repoRoot = join(__dirname, "..", "..");
const NAME = "plb-e2e";
/** The lab stack's own config (Pulumi.lab.yaml), with this test's name. */
const labConfig = (
  load(readFileSync(join(repoRoot, "Pulumi.lab.yaml"), "utf8")) as { config: Record<string, unknown> }
).config;

async function namespacesLeft(): Promise<string[]> {
  const r = await execCommand("ip", ["netns", "list"]);
  return r.stdout
    .split("\n")
    .map((l) => l.split(" ")[0]!)
    .filter((n) => n.startsWith(`${NAME}-`));
}

/** The router's next hops for the VIP once `done` accepts them (bounded); what it had otherwise. */
async function hopsWhen(plan: LabPlan, vip: string, done: (hops: string[]) => boolean): Promise<string[]> {
  let hops: string[] = [];
  await waitUntil(
    async () => {
      hops = (await routerNextHops(plan, vip)).map((h) => h.gateway);
      return done(hops);
    },
    120_000,
    500,
  );
  return hops;
}

/** The router's next hops for the VIP once they equal `want` (bounded); what it had otherwise. */
const hopsBecome = (plan: LabPlan, vip: string, want: string[]) =>
  hopsWhen(plan, vip, (hops) => JSON.stringify(hops) === JSON.stringify(want));

/** The peers each BIRD (in its pod, as `kubectl exec … birdc` would) and the router's FRR have BFD Up with. */
async function bfdUp(
  plan: LabPlan,
  core: CoreV1Api,
): Promise<{ router: string[]; reflectors: string[][]; speakers: string[][] }> {
  // birdc in the container's own mount and network namespaces: its socket is on a memory emptyDir.
  const bird = async (prefix: string, container: string, socket: string) => {
    const pods = (await core.listNamespacedPod({ namespace: "portable-lb-system" })).items.filter(
      (p) => p.metadata?.name?.startsWith(prefix) && p.status?.containerStatuses?.every((c) => c.ready),
    );
    return Promise.all(
      pods.map(async (pod) => {
        const pid = containerPid(plan, { node: pod.spec!.nodeName!, pod }, container);
        const show = ["birdc", "-s", socket, "show", "bfd", "sessions"];
        const out = await execCommand("nsenter", [`--target=${pid}`, "--mount", "--net", "--", ...show]);
        return upPeers(parseBirdBfdSessions(out.stdout));
      }),
    );
  };
  // vtysh needs the router's vty folder: bfdd's --vty_socket, found among the router's processes.
  const pids = (await execCommand("ip", ["netns", "pids", plan.router.netns])).stdout
    .split(/\s+/)
    .filter(Boolean);
  const vty = pids
    .map((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      } catch {
        return [];
      }
    })
    .find((argv) => argv[0]?.endsWith("/bfdd"))
    ?.find((_arg, i, argv) => argv[i - 1] === "--vty_socket");
  const frr = await execCommand("ip", [
    ...["netns", "exec", plan.router.netns],
    ...["vtysh", "--vty_socket", vty ?? "", "-c", "show bfd peers json"],
  ]);
  return {
    router: upPeers(parseFrrBfdPeers(frr.stdout)),
    reflectors: await bird("portable-lb-rr-", "bird", `${RR_PATHS.runDir}/bird.ctl`),
    speakers: await bird(
      "portable-lb-controller-",
      "bgp-speaker",
      `${LB_PATHS.birdRunDir}/${BIRD_RUN_FILES.socket}`,
    ),
  };
}

/** Per LB pod, its nftables DSR dispatch map as `kubectl exec … nft list map` would show it. */
async function dsrMaps(plan: LabPlan, core: CoreV1Api): Promise<string[]> {
  const pods = (await core.listNamespacedPod({ namespace: "portable-lb-system" })).items.filter(
    (p) =>
      p.metadata?.name?.startsWith("portable-lb-controller-") &&
      p.status?.containerStatuses?.every((c) => c.ready),
  );
  return Promise.all(
    pods.map(async (pod) => {
      const pid = containerPid(plan, { node: pod.spec!.nodeName!, pod }, "controller");
      const list = ["nft", "list", "map", "ip", "portable_lb", "dsr_services"];
      return (await execCommand("nsenter", [`--target=${pid}`, "--net", "--", ...list])).stdout;
    }),
  );
}

/** Each ready pod of `prefix` in `namespace` with what `command` prints in the network namespace of its `container`. */
async function inReadyPods(
  plan: LabPlan,
  core: CoreV1Api,
  where: { namespace: string; prefix: string; container: string },
  command: string[],
): Promise<{ pod: string; out: string }[]> {
  const pods = (await core.listNamespacedPod({ namespace: where.namespace })).items.filter(
    (p) => p.metadata?.name?.startsWith(where.prefix) && p.status?.containerStatuses?.every((c) => c.ready),
  );
  return Promise.all(
    pods.map(async (pod) => {
      const pid = containerPid(plan, { node: pod.spec!.nodeName!, pod }, where.container);
      const out = (await execCommand("nsenter", [`--target=${pid}`, "--net", "--", ...command])).stdout;
      return { pod: pod.metadata!.name!, out };
    }),
  );
}

// Bounds: a cold up starts a control plane, six nodes and ~20 pods on two CPUs.
const UP_MS = 15 * 60_000;
const STEP_MS = 8 * 60_000;
/**
 * Pulumi is interrupted (SIGINT: it cancels and releases the stack's lock) a minute before the test's
 * own bound, so a slow operation fails its test instead of locking the stack for the next ones and
 * for the destroy that cleans up.
 */
const within = (testMs: number) => ({
  color: "never" as const,
  signal: AbortSignal.timeout(testMs - 60_000),
});

describe("the lab: npm run lab's stack, end to end", () => {
  let stack: TestStack;
  let plan: LabPlan;
  let vip: string;
  let kubeconfig: string;
  let upSucceeded = false;
  /** A later step has nothing to check (and must not wait out its bound) when the first up failed. */
  const requireUp = () => {
    if (!upSucceeded) throw new Error("the first up failed (see above), so this step cannot run");
  };
  const lbNodeIps = () => plan.nodes.filter((n) => n.role === "lb").map((n) => n.ip);

  beforeAll(async () => {
    stack = await TestStack.create({
      program: repoRoot,
      config: {
        ...labConfig,
        "portable-lb:environment": { ...(labConfig["portable-lb:environment"] as object), name: NAME },
      },
    });
  });
  afterAll(async () => {
    // A failed test still leaves nothing running.
    await stack?.stack.destroy(within(STEP_MS)).catch((err: unknown) => console.error(err));
    await stack?.dispose();
  }, STEP_MS);

  it(
    "comes up with a VIP the router reaches over every LB node, serving from every backend",
    async () => {
      const up = await stack.stack.up(within(UP_MS));
      expect(up.summary.result).toBe("succeeded");
      plan = up.outputs.labPlan!.value as LabPlan;
      vip = up.outputs.demoVip!.value as string;
      kubeconfig = up.outputs.kubeconfig!.value as string;
      upSucceeded = true;
      expect(vip).toMatch(/^10\.1\.1\.\d+$/);

      // Fig. 12's shape: one next hop of weight 1 per LB node.
      expect(await hopsBecome(plan, vip, lbNodeIps())).toEqual(lbNodeIps());
      expect((await routerNextHops(plan, vip)).every((h) => h.weight === 1)).toBe(true);

      const spread = await curlSpread(plan, vip, 60);
      expect(spread.errors).toEqual([]);
      expect(Object.keys(spread.lbNodes).sort()).toEqual(["lb1", "lb2", "lb3"]);
      expect(Object.keys(spread.backends)).toHaveLength(3);
      for (const backend of Object.keys(spread.backends)) expect(backend).toMatch(/^10\.244\.\d+\.\d+$/);

      // The router's bridge is a switch: no netfilter on the frames it bridges (br_netfilter starts
      // every namespace with it on; a kernel without br_netfilter has nothing to turn off).
      const router = labNamespace(plan, plan.router.netns);
      const bridgeNf = existsSync("/proc/sys/net/bridge")
        ? await router.sysctl("net.bridge.bridge-nf-call-iptables")
        : "no br_netfilter";
      expect(bridgeNf).toMatch(/^(0|no br_netfilter)$/);
    },
    UP_MS,
  );

  it("serves the demo by direct server return: every LB pod hands its flows on through tunnels", async () => {
    requireUp();
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const maps = await dsrMaps(plan, core);
    expect(maps).toHaveLength(3);
    for (const map of maps) expect(map).toContain(`${vip} . tcp . 80`);
    // No port served by SNAT for want of DSR.
    const events = await core.listEventForAllNamespaces({
      fieldSelector: "reason=DirectServerReturnUnavailable",
    });
    expect(events.items.map((e) => e.message)).toEqual([]);

    // The fast path carries it (lb-image/fastpath): each LB pod's tc program forwarded the requests of
    // the first case, and each demo pod decapsulates in its own tc program.
    const metrics = await inReadyPods(
      plan,
      core,
      { namespace: "portable-lb-system", prefix: "portable-lb-controller-", container: "controller" },
      ["curl", "-sf", "--max-time", "5", "http://127.0.0.1:9150/metrics"],
    );
    expect(metrics).toHaveLength(3);
    for (const { pod, out } of metrics) {
      expect({ pod, up: /^portable_lb_fast_path_up (\S+)$/m.exec(out)?.[1] }).toEqual({ pod, up: "1" });
      const forwarded = /^portable_lb_fast_path_packets_total\{result="forwarded"\} (\S+)$/m.exec(out)?.[1];
      expect({ pod, forwarded: Number(forwarded) > 0 }).toEqual({ pod, forwarded: true });
    }
    const filters = await inReadyPods(plan, core, { namespace: "demo", prefix: "demo-", container: "web" }, [
      "tc",
      "filter",
      "show",
      "dev",
      "eth0",
      "ingress",
    ]);
    expect(filters).toHaveLength(3);
    for (const { pod, out } of filters)
      expect({ pod, decap: /dsr_decap/.test(out) }).toEqual({ pod, decap: true });
    // And each LB node's agent runs the node's programs, which carried those requests from the
    // uplink into the LB pod and its tunnel packets back out.
    for (const node of plan.nodes.filter((n) => n.role === "lb")) {
      const url = `http://${node.ip}:9152/metrics`;
      const r = await execCommand("ip", ["netns", "exec", node.netns, "curl", "-sf", "--max-time", "5", url]);
      const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(r.stdout)?.[1]);
      const packets = (result: string) =>
        metric(`portable_lb_node_fast_path_packets_total\\{result="${result}"\\}`);
      expect({ node: node.name, up: metric("portable_lb_node_fast_path_up") }).toEqual({
        node: node.name,
        up: 1,
      });
      expect({ node: node.name, toPod: packets("to_pod") > 0, fromPod: packets("from_pod") > 0 }).toEqual({
        node: node.name,
        toPod: true,
        fromPod: true,
      });
    }
  }, 60_000);

  it(
    "serves a Service made with `kubectl expose --type=LoadBalancer` in our class, and lets it go",
    async () => {
      requireUp();
      const kubectl = async (...args: string[]) => {
        const r = await execCommand("kubectl", ["--kubeconfig", kubeconfig, "-n", "demo", ...args]);
        if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
        return r.stdout.trim();
      };
      const cls = await kubectl("get", "service", "demo", "-o", "jsonpath={.spec.loadBalancerClass}");
      expect(cls).not.toBe("");
      // A class can only be given at creation; `kubectl expose` takes it through --overrides.
      await kubectl(
        ...["expose", "deployment", "demo", "--name", "exposed", "--type=LoadBalancer"],
        ...[
          "--port=80",
          "--target-port=80",
          `--overrides={"apiVersion":"v1","spec":{"loadBalancerClass":"${cls}"}}`,
        ],
      );
      let ip = "";
      await waitUntil(
        async () => {
          ip = await kubectl(
            "get",
            "service",
            "exposed",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
          );
          return ip !== "";
        },
        60_000,
        500,
      );
      expect(ip).toMatch(/^10\.1\.1\.\d+$/);
      expect(ip).not.toBe(vip);
      expect(await hopsBecome(plan, ip, lbNodeIps())).toEqual(lbNodeIps());
      const spread = await curlSpread(plan, ip, 30);
      expect(spread.errors).toEqual([]);
      expect(Object.keys(spread.backends)).toHaveLength(3);

      await kubectl("delete", "service", "exposed");
      expect(await hopsBecome(plan, ip, [])).toEqual([]);
    },
    STEP_MS,
  );

  it(
    "has BFD Up between the router and each reflector, and between each reflector and every LB speaker",
    async () => {
      requireUp();
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfig);
      const core = kc.makeApiClient(CoreV1Api);
      const reflectors = plan.reflectors.map((r) => r.address).sort();
      // Each reflector: the router and the three LB speakers (by pod or, masqueraded, node address).
      const seen = async () => {
        const up = await bfdUp(plan, core);
        return {
          router: up.router,
          reflectors: up.reflectors.map((p) => ({
            router: p.includes(plan.router.ip),
            speakers: p.length - 1,
          })),
          speakers: up.speakers,
        };
      };
      const want = {
        router: reflectors,
        reflectors: reflectors.map(() => ({ router: true, speakers: lbNodeIps().length })),
        speakers: lbNodeIps().map(() => reflectors),
      };
      await waitUntil(async () => JSON.stringify(await seen()) === JSON.stringify(want), 60_000, 1_000);
      expect(await seen()).toEqual(want);
    },
    STEP_MS,
  );

  it(
    "changes nothing on a second up",
    async () => {
      requireUp();
      const again = await stack.stack.up(within(STEP_MS));
      const changes = again.summary.resourceChanges ?? {};
      expect(Object.keys(changes).filter((k) => k !== "same")).toEqual([]);
    },
    STEP_MS,
  );

  it(
    "heals a dead kubelet, containerd and etcd in place on the next up, replacing nothing",
    async () => {
      requireUp();
      const kill = async (pattern: string) => {
        const pid = Number((await execCommand("pgrep", ["-f", "-o", "--", pattern])).stdout.trim());
        expect(pid).toBeGreaterThan(0);
        process.kill(pid, "SIGKILL");
      };
      await kill(`--root-dir=${labNodeLayout(plan, "lb2").kubeletRoot}`);
      await kill(`containerd --config ${labNodeLayout(plan, "worker3").containerdConfig}`);
      await kill(`etcd --name=portable-lb --data-dir=${join(controlPlaneDir(plan), "etcd")}`);
      const again = await stack.stack.up(within(STEP_MS));
      expect(again.summary.result).toBe("succeeded");
      // The three pieces updated in place; nothing created, deleted or replaced.
      expect(again.summary.resourceChanges).toEqual({ same: expect.any(Number), update: 3 });
      expect(await hopsBecome(plan, vip, lbNodeIps())).toEqual(lbNodeIps());
      expect((await curlSpread(plan, vip, 30)).errors).toEqual([]);
    },
    STEP_MS,
  );

  it(
    "follows the LB pods from 3 to 1 and back to 3 in the router's route",
    async () => {
      requireUp();
      const lb = labConfig["portable-lb:loadBalancer"] as object;
      const scale = async (replicas: number) => {
        await stack.stack.setConfig("portable-lb:loadBalancer", {
          value: JSON.stringify({ ...lb, replicas }),
        });
        await stack.stack.up(within(STEP_MS));
      };
      await scale(1);
      try {
        const hops = await hopsWhen(plan, vip, (h) => h.length === 1);
        expect(hops).toHaveLength(1);
        expect(lbNodeIps()).toContain(hops[0]);
        const spread = await curlSpread(plan, vip, 20);
        expect(spread.errors).toEqual([]);
        expect(Object.keys(spread.lbNodes)).toHaveLength(1);
      } finally {
        // Back to 3 even when a check above failed: the fault cases after this one start from 3.
        await scale(3);
      }
      expect(await hopsBecome(plan, vip, lbNodeIps())).toEqual(lbNodeIps());
    },
    2 * STEP_MS,
  );

  describeLabFaults(() => ({ plan, vip, kubeconfig }), requireUp);

  it(
    "is destroyed completely: no namespace, node process, pod, control plane or folder left",
    async () => {
      requireUp();
      const down = await stack.stack.destroy(within(STEP_MS));
      expect(down.summary.result).toBe("succeeded");
      expect(await namespacesLeft()).toEqual([]);
      // containerd, the kubelets, kube-proxies and shims all name their node's folder.
      const nodeProcesses = await execCommand("pgrep", ["-f", labDir(plan)]);
      expect(nodeProcesses.stdout.trim()).toBe("");
      for (const n of plan.nodes) expect(cgroupPids(labNodeLayout(plan, n.name).cgroupRoot)).toEqual([]);
      expect(existsSync(controlPlaneDir(plan))).toBe(false);
      expect(existsSync(labDir(plan))).toBe(false);
    },
    STEP_MS,
  );
});
