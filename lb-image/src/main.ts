// The LB pod's controller process: `portable-lb-controller --config /etc/portable-lb/config.json`.
// Kubernetes access comes from the pod's ServiceAccount (or KUBECONFIG outside a cluster).
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { LB_PATHS, lbConfigSchema } from "@portable-lb/core/config";
import { pino } from "pino";
import { startController } from "./controller/controller.ts";

const log = pino({ base: { component: "portable-lb-controller" } });

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { config: { type: "string", default: LB_PATHS.configFile } } });
  const parsed = lbConfigSchema.safeParse(JSON.parse(readFileSync(values.config, "utf8")));
  if (!parsed.success) {
    // Bad config never reaches the kernel: exit, and the previous pod (if any) keeps serving.
    log.fatal({ issues: parsed.error.issues }, `invalid config ${values.config}`);
    process.exit(2);
  }
  const kubeconfig = new KubeConfig();
  kubeconfig.loadFromDefault();
  const controller = await startController({
    config: parsed.data,
    kubeconfig,
    log,
    namespace: process.env.POD_NAMESPACE ?? "portable-lb-system",
    identity: process.env.POD_NAME ?? hostname(),
  });
  const shutdown = (signal: string) => {
    // The rules stay: the pod's network namespace goes away with the pod, and until then draining
    // connections still need them.
    log.info({ signal }, "stopping");
    void controller.stop().then(() => process.exit(0));
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
}

main().catch((err: unknown) => {
  log.fatal({ err }, "controller failed to start");
  process.exit(1);
});
