// What the lab benchmarks share: the running lab (`npm run lab`), found through its stack's outputs
// on stdin (`npm run --silent lab -- outputs | node bench/lab….ts`), with an API client.
import { text } from "node:stream/consumers";
import { AppsV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { type LabPlan, waitUntil } from "@portable-lb/lab";

export interface LabRig {
  plan: LabPlan;
  vip: string;
  core: CoreV1Api;
  apps: AppsV1Api;
}

/** Reads the outputs from stdin to its end (asynchronously: the lab command may take minutes). */
export async function labRig(): Promise<LabRig> {
  const outputs = JSON.parse(await text(process.stdin)) as {
    labPlan?: LabPlan;
    demoVip?: string;
    kubeconfig?: string;
  };
  if (!outputs.labPlan || !outputs.demoVip || !outputs.kubeconfig)
    throw new Error(
      "no lab outputs on stdin: run `npm run lab` first, then `npm run --silent lab -- outputs | …`",
    );
  const kc = new KubeConfig();
  kc.loadFromFile(outputs.kubeconfig);
  return {
    plan: outputs.labPlan,
    vip: outputs.demoVip,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
  };
}

/**
 * The data-plane mode the lab's LB pods run with, from their ConfigMap: snat, dsr (with the fast
 * path where the kernel allows it: the lab's test checks it is up) or "dsr, kernel path" (fastPath off).
 */
export async function dataPlaneMode(rig: LabRig): Promise<string> {
  const cm = await rig.core.readNamespacedConfigMap({
    name: "portable-lb-controller-config",
    namespace: "portable-lb-system",
  });
  const config = JSON.parse(cm.data?.["config.json"] ?? "{}") as {
    dataPlane?: { mode?: string; fastPath?: string };
  };
  const mode = config.dataPlane?.mode ?? "unknown";
  return mode === "dsr" && config.dataPlane?.fastPath === "off" ? "dsr, kernel path" : mode;
}

const DEMO = { namespace: "demo", name: "demo" };

/** How many demo pods (the lab's backends) the Deployment asks for. */
export async function demoReplicas(rig: LabRig): Promise<number> {
  return (await rig.apps.readNamespacedDeploymentScale(DEMO)).spec!.replicas!;
}

/** Asks for `n` demo pods, without waiting for them. */
export async function setDemoReplicas(rig: LabRig, n: number): Promise<void> {
  await rig.apps.replaceNamespacedDeploymentScale({
    ...DEMO,
    body: { metadata: { ...DEMO }, spec: { replicas: n } },
  });
}

/** Scales the demo Deployment; resolves with the pods' addresses once exactly `n` run and are ready. */
export async function scaleDemo(rig: LabRig, n: number): Promise<string[]> {
  await setDemoReplicas(rig, n);
  let ips: string[] = [];
  const ok = await waitUntil(
    async () => {
      const pods = (
        await rig.core.listNamespacedPod({ namespace: DEMO.namespace, labelSelector: `app=${DEMO.name}` })
      ).items;
      const ready = pods.filter(
        (p) =>
          !p.metadata?.deletionTimestamp &&
          p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
      );
      ips = ready.map((p) => p.status!.podIP!).sort();
      return ready.length === n && pods.length === n;
    },
    180_000,
    500,
  );
  if (!ok) throw new Error(`demo: ${n} ready pods not reached in 180 s (have ${ips.join(", ")})`);
  return ips;
}
