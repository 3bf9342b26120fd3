// Failover of the AWS cloud-routes mode on moto, with default settings (Lease 3 s, renew 1 s, resync
// 60 s): three LB pods' cloud-routes processes (test/harness/cloud/awsRouteRig.ts), a local control
// plane of its own, 12 VIPs in two route tables. Measures, over --events each:
//   kill      owner SIGKILLed -> every VIP it owned routed to its new live owner in every table;
//   graceful  owner SIGTERMed (graceful stop: it points its VIPs at their successors) -> the same;
//   steady    EC2 API calls per minute per pod while nothing changes (counted by a pass-through proxy).
// The routes are polled (one DescribeRouteTables) every 20 ms from the signal on, so each figure is
// at most ~20 ms + one DescribeRouteTables late.
//   npm run bench:cloud-routes -- [--events 100] [--steady-s 120] [--phases kill,graceful,steady]
import { KubeConfig } from "@kubernetes/client-node";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { ownerOf } from "../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { AwsRouteRig } from "../test/harness/cloud/awsRouteRig.ts";
import { benchControlPlane, progress } from "./lib/benchSetup.ts";
import { summarize } from "./lib/stats.ts";
import { Teardown } from "./lib/teardown.ts";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "100" },
    "steady-s": { type: "string", default: "120" },
    phases: { type: "string", default: "kill,graceful,steady" },
  },
});
const EVENTS = Number(values.events);
const STEADY_S = Number(values["steady-s"]);
const PHASES = new Set(values.phases.split(","));
const PODS = ["lb-a", "lb-b", "lb-c"];
const VIPS = Array.from({ length: 12 }, (_, i) => `10.1.30.${i + 1}`);

async function main(): Promise<void> {
  const teardown = new Teardown();
  try {
    const cp = await benchControlPlane(teardown, "bench-cloudroutes");
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    const rig = new AwsRouteRig({
      kubeconfig: kc,
      kubeconfigPath: cp.kubeconfig,
      namespace: "bench-cloudroutes",
      loadBalancerClass: "portable-lb.io/bench-cloudroutes",
      vips: VIPS,
      pods: PODS,
    });
    teardown.add({ name: "cloud-routes rig", stop: () => rig.teardown(), killNow: () => rig.killNow() });
    await rig.setup();
    // Every pod's EC2 calls pass through the proxy, which counts them.
    const start = (pod: string) => rig.start(pod, { endpoint: rig.proxy.endpoint });
    PODS.forEach(start);
    /** Fails with the pods' last log lines, which tell why. */
    const fail = (why: string): never => {
      for (const pod of PODS) progress(`--- ${pod}\n${rig.output(pod).slice(-3000)}`);
      throw new Error(why);
    };
    // A loaded machine can take minutes to start three Node processes; that is not failover time.
    if (!(await rig.running(PODS))) fail("the pods never started");
    if (!(await rig.allRoutedToOwners(PODS, VIPS, 60_000))) fail("the routes never converged");

    /** The machine's 1-minute load average at each sample: it is shared, and the figures depend on it. */
    const load = (): string => loadavg()[0]!.toFixed(2);
    const failover = async (
      signal: "SIGKILL" | "SIGTERM",
    ): Promise<{ samples: number[]; loads: number[] }> => {
      const samples: number[] = [];
      const loads: number[] = [];
      for (let i = 0; i < EVENTS; i++) {
        const owners = PODS.filter((p) => VIPS.some((v) => ownerOf(v, PODS) === p));
        const pod = owners[i % owners.length]!;
        const live = PODS.filter((p) => p !== pod);
        const moved = VIPS.filter((v) => ownerOf(v, PODS) === pod);
        const t0 = performance.now();
        // Polled from the signal on: a stopping pod moves its VIPs before it exits.
        const stopped = rig.stop(pod, signal);
        if (!(await rig.allRoutedToOwners(live, moved, 30_000, 20)))
          fail(`${signal} #${i}: VIPs never moved`);
        samples.push((performance.now() - t0) / 1000);
        loads.push(loadavg()[0]!);
        await stopped;
        // Every sample on stderr as it comes: a run that fails later still tells what it measured.
        progress(`${signal} #${i} ${pod}: ${samples.at(-1)!.toFixed(3)} s (load ${load()})`);
        start(pod);
        if (!(await rig.running([pod]))) fail(`${signal} #${i}: ${pod} never started again`);
        if (!(await rig.allRoutedToOwners(PODS, VIPS, 60_000))) fail(`${signal} #${i}: no return`);
      }
      return { samples, loads };
    };
    const round = (x: ReturnType<typeof summarize>) =>
      Object.fromEntries(Object.entries(x).map(([key, v]) => [key, Math.round(v * 1000) / 1000]));
    // Each phase's figures are printed as it ends (a long run stopped later keeps them).
    const phase = async (signal: "SIGKILL" | "SIGTERM", name: string) => {
      progress(`${name} x ${EVENTS}`);
      const { samples, loads } = await failover(signal);
      const summary = { ...round(summarize(samples)), load1m: round(summarize(loads)) };
      progress(`${name} -> moved (s): ${JSON.stringify(summary)}`);
      return summary;
    };
    // Steady state first, while every pod has run undisturbed since the convergence; then the
    // shorter graceful events, then the kills (each phase's figures are printed as it ends).
    rig.proxy.calls.clear();
    if (PHASES.has("steady")) {
      progress(`steady state: counting EC2 calls for ${STEADY_S} s`);
      await sleep(3_000);
      rig.proxy.calls.clear();
      await sleep(STEADY_S * 1000);
    }
    const steady = Object.fromEntries(rig.proxy.calls);
    const perPodPerMin =
      [...rig.proxy.calls.values()].reduce((a, b) => a + b, 0) / PODS.length / (STEADY_S / 60);
    progress(
      `steady state: ${JSON.stringify(steady)}, ${perPodPerMin.toFixed(2)} calls/min/pod (load ${load()})`,
    );
    const graceful = PHASES.has("graceful") ? await phase("SIGTERM", "graceful stop") : undefined;
    const kill = PHASES.has("kill") ? await phase("SIGKILL", "owner SIGKILL") : undefined;

    console.log(
      JSON.stringify(
        {
          settings: {
            leaseDurationS: 3,
            renewMs: 1000,
            resyncS: 60,
            pods: PODS.length,
            vips: VIPS.length,
            tables: 2,
          },
          gracefulStopToMovedS: graceful,
          ownerKillToMovedS: kill,
          steadyState: { seconds: STEADY_S, callsByAction: steady, callsPerMinutePerPod: perPodPerMin },
        },
        null,
        2,
      ),
    );
  } finally {
    await teardown.run();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exitCode = 1;
});
