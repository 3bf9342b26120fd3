// `portable-lb-withdraw [--config /etc/portable-lb/config.json] [--timeout-seconds 20]`: the speaker
// container's preStop (see withdraw.ts). Exit 0 once withdrawn, 1 when the controller did not, 2 on
// a bad config or flag.
import { parseArgs } from "node:util";
import { LB_COMMANDS, LB_PATHS, LB_STOP_TIMEOUTS } from "@portable-lb/core/config";
import { pino } from "pino";
import { prestopUrl, withdraw } from "./withdraw.ts";

const log = pino({ base: { component: LB_COMMANDS.withdraw } });

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      config: { type: "string", default: LB_PATHS.configFile },
      // The pod's grace period counts this in, before the drain.
      "timeout-seconds": { type: "string", default: String(LB_STOP_TIMEOUTS.preStopS) },
    },
  });
  const timeoutS = Number(values["timeout-seconds"]);
  let url: string;
  try {
    if (!(timeoutS > 0))
      throw new Error(`--timeout-seconds must be a positive number (got "${values["timeout-seconds"]}")`);
    url = prestopUrl(values.config);
  } catch (err) {
    log.fatal((err as Error).message);
    return 2;
  }
  const result = await withdraw(url, timeoutS * 1000);
  if (!result.ok) {
    log.error(result.error);
    return 1;
  }
  log.info({ url, answer: result.answer }, "withdrawn");
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log.fatal({ err }, "withdraw failed");
    process.exit(2);
  },
);
