// `portable-lb-withdraw --port PORT [--run-dir /run/bird] [--timeout-seconds 20]`: the speaker
// container's preStop (see withdraw.ts). PORT is the controller's health port (the pod spec passes
// it: this container has no LB config). Exit 0 once withdrawn, by the controller or through BIRD,
// 1 when neither withdrew in time, 2 on a bad flag.
import { parseArgs } from "node:util";
// The constants alone: nothing here needs the LB config's schema.
import { BIRD_RUN_FILES, LB_COMMANDS, LB_PATHS, LB_STOP_TIMEOUTS } from "@portable-lb/core/config/lbImage";
import { join } from "node:path";
import { pino } from "pino";
import { BirdControl } from "../bgp/birdControl.ts";
import { askController, prestopUrl, withdrawThroughBird } from "./withdraw.ts";

const log = pino({ base: { component: LB_COMMANDS.withdraw } });

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      port: { type: "string" },
      "run-dir": { type: "string", default: LB_PATHS.birdRunDir },
      // The pod's grace period counts this in, before the drain.
      "timeout-seconds": { type: "string", default: String(LB_STOP_TIMEOUTS.preStopS) },
    },
  });
  const port = Number(values.port);
  const timeoutS = Number(values["timeout-seconds"]);
  if (!(Number.isInteger(port) && port > 0 && port < 65536)) {
    log.fatal(`--port must be the controller's health port, 1-65535 (got "${values.port ?? ""}")`);
    return 2;
  }
  if (!(timeoutS > 0)) {
    log.fatal(`--timeout-seconds must be a positive number (got "${values["timeout-seconds"]}")`);
    return 2;
  }
  const started = Date.now();
  const url = prestopUrl(port);
  const controllerMs = Math.min(LB_STOP_TIMEOUTS.controllerS, timeoutS / 2) * 1000;
  const asked = await askController(url, controllerMs);
  if (asked.ok) {
    log.info({ url, answer: asked.answer }, "withdrawn by the controller");
    return 0;
  }
  log.warn(`${asked.error}; withdrawing through BIRD's socket`);
  const runDir = values["run-dir"];
  const bird = new BirdControl(join(runDir, BIRD_RUN_FILES.socket));
  const direct = await withdrawThroughBird(bird, runDir, timeoutS * 1000 - (Date.now() - started));
  if (!direct.ok) {
    log.error(direct.error);
    return 1;
  }
  log.info({ answer: direct.answer, tookMs: Date.now() - started }, "withdrawn");
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log.fatal({ err }, "withdraw failed");
    process.exit(2);
  },
);
