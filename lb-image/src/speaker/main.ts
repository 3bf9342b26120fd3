// `portable-lb-speaker [--config /run/bird/bird.conf] [--socket /run/bird/bird.ctl] [--wait-seconds 600]`:
// the BGP speaker container's entrypoint (see speaker.ts).
import { parseArgs } from "node:util";
// The constants alone: the config module loads zod and every schema (~110 ms of a start that counts).
import { LB_COMMANDS, LB_PATHS } from "@portable-lb/core/config/lbImage";
import { pino } from "pino";
import { runSpeaker, SPEAKER_EXIT } from "./speaker.ts";

const log = pino({ base: { component: LB_COMMANDS.speaker } });
// First thing: this runs as PID 1 of its container, where a signal without a handler is ignored, so
// a SIGTERM while waiting for the config would otherwise hang until the kubelet's SIGKILL.
const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => stop.abort(signal));

// async: a bad flag (parseArgs throws) ends in the same clear exit as any other failure.
async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      config: { type: "string", default: `${LB_PATHS.birdRunDir}/bird.conf` },
      socket: { type: "string", default: `${LB_PATHS.birdRunDir}/bird.ctl` },
      // The controller writes the first config after its first sync with the API server.
      "wait-seconds": { type: "string", default: "600" },
    },
  });
  const waitS = Number(values["wait-seconds"]);
  if (!Number.isFinite(waitS) || waitS < 0) {
    log.fatal(`--wait-seconds must be a number of seconds (got "${values["wait-seconds"]}")`);
    return SPEAKER_EXIT.invalidConfig;
  }
  return runSpeaker({ config: values.config, socket: values.socket, waitMs: waitS * 1000, log }, stop.signal);
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log.fatal({ err }, "speaker failed");
    process.exit(SPEAKER_EXIT.failed);
  },
);
