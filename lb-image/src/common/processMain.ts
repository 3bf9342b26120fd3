// What every LB-image process does at start and stop: read and validate the LB config (a bad one
// exits before anything touches the kernel, so the previous pod keeps serving), load the API
// credentials, and stop cleanly on SIGTERM/SIGINT.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { LB_PATHS, lbConfigSchema, type LbConfig } from "@portable-lb/core/config";
import { pino, type Logger } from "pino";

export interface ProcessContext {
  config: LbConfig;
  kubeconfig: KubeConfig;
  log: Logger;
}

/** Runs `start` with the config named by `--config`; `start` returns the stop function. */
export function runProcess(component: string, start: (ctx: ProcessContext) => Promise<() => Promise<void>>) {
  const log = pino({ base: { component } });
  // Installed first: as a container's PID 1 the process ignores any signal it has no handler for,
  // so a start that hangs (an unreachable API server) must still stop on SIGTERM.
  let stop: (() => Promise<void>) | undefined;
  const shutdown = (signal: string) => {
    log.info({ signal }, "stopping");
    void (stop?.() ?? Promise.resolve()).then(() => process.exit(0));
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
  const main = async () => {
    const { values } = parseArgs({ options: { config: { type: "string", default: LB_PATHS.configFile } } });
    const parsed = lbConfigSchema.safeParse(JSON.parse(readFileSync(values.config, "utf8")));
    if (!parsed.success) {
      log.fatal({ issues: parsed.error.issues }, `invalid config ${values.config}`);
      process.exit(2);
    }
    const kubeconfig = new KubeConfig();
    // In a pod: the ServiceAccount; outside (tests, the lab): KUBECONFIG.
    kubeconfig.loadFromDefault();
    stop = await start({ config: parsed.data, kubeconfig, log });
  };
  main().catch((err: unknown) => {
    log.fatal({ err }, `${component} failed to start`);
    process.exit(1);
  });
}
