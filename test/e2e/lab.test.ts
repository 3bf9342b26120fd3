// The lab end to end, through the real Pulumi engine and the root program, as `npm run lab` runs it
// (but in a stack and namespaces of its own, so a developer's lab is left alone): up → the demo
// VIP answers, the router has one ECMP next hop per LB node, requests spread over LB nodes and
// backends, BFD is Up between the router, the reflectors and every LB speaker (their pods run by
// the lab nodes' real kubelets, from the images we build) → a second up changes nothing
// → LB pods 3 → 1 → 3, the route following → destroy, leaving no namespace, process or folder behind.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { load } from "js-yaml";
import {
  cgroupPids,
  controlPlaneDir,
  curlSpread,
  execCommand,
  labDir,
  labNodeLayout,
  type LabPlan,
  routerNextHops,
  waitUntil,
} from "@portable-lb/lab";
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

/** The control socket of every BIRD the lab's pods run, by kind: in their emptyDirs, under each kubelet's folder. */
function birdSockets(plan: LabPlan): { reflectors: string[]; speakers: string[] } {
  const sockets = plan.nodes.flatMap((n) => {
    const pods = join(labNodeLayout(plan, n.name).kubeletRoot, "pods");
    return existsSync(pods)
      ? readdirSync(pods, { recursive: true, encoding: "utf8" })
          .filter((f) => f.endsWith("/bird.ctl"))
          .map((f) => join(pods, f))
      : [];
  });
  return {
    // The RouteReflector's emptyDir is "run", the LB pod's "bird-run".
    reflectors: sockets.filter((s) => s.endsWith("/run/bird.ctl") && !s.endsWith("/bird-run/bird.ctl")),
    speakers: sockets.filter((s) => s.endsWith("/bird-run/bird.ctl")),
  };
}

/** The peers each BIRD (by socket) and the router's FRR have BFD Up with. */
async function bfdUp(
  plan: LabPlan,
): Promise<{ router: string[]; reflectors: string[][]; speakers: string[][] }> {
  // From the socket's folder: its full path here is longer than a unix socket address may be.
  const bird = async (socket: string) => {
    const show = 'cd "$(dirname "$0")" && exec birdc -s bird.ctl show bfd sessions';
    return upPeers(parseBirdBfdSessions((await execCommand("sh", ["-c", show, socket])).stdout));
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
  const { reflectors, speakers } = birdSockets(plan);
  return {
    router: upPeers(parseFrrBfdPeers(frr.stdout)),
    reflectors: await Promise.all(reflectors.map(bird)),
    speakers: await Promise.all(speakers.map(bird)),
  };
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
      expect(spread.failed).toBe(0);
      expect(Object.keys(spread.lbNodes).sort()).toEqual(["lb1", "lb2", "lb3"]);
      expect(Object.keys(spread.backends)).toHaveLength(3);
      for (const backend of Object.keys(spread.backends)) expect(backend).toMatch(/^10\.244\.\d+\.\d+$/);
    },
    UP_MS,
  );

  it(
    "has BFD Up between the router and each reflector, and between each reflector and every LB speaker",
    async () => {
      requireUp();
      const reflectors = plan.reflectors.map((r) => r.address).sort();
      // Each reflector: the router and the three LB speakers (by pod or, masqueraded, node address).
      const seen = async () => {
        const up = await bfdUp(plan);
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
      expect((await curlSpread(plan, vip, 30)).failed).toBe(0);
    },
    STEP_MS,
  );

  it(
    "follows the LB pods from 3 to 1 and back to 3 in the router's route",
    async () => {
      requireUp();
      const lb = labConfig["portable-lb:loadBalancer"] as object;
      await stack.stack.setConfig("portable-lb:loadBalancer", {
        value: JSON.stringify({ ...lb, replicas: 1 }),
      });
      await stack.stack.up(within(STEP_MS));
      const hops = await hopsWhen(plan, vip, (h) => h.length === 1);
      expect(hops).toHaveLength(1);
      expect(lbNodeIps()).toContain(hops[0]);
      const spread = await curlSpread(plan, vip, 20);
      expect(spread.failed).toBe(0);
      expect(Object.keys(spread.lbNodes)).toHaveLength(1);

      await stack.stack.setConfig("portable-lb:loadBalancer", {
        value: JSON.stringify({ ...lb, replicas: 3 }),
      });
      await stack.stack.up(within(STEP_MS));
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
