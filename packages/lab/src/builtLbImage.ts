// The LB image the lab's pods run: this checkout's own build, which lb-image/image/build.sh records
// in lb-image/.image.json (`npm run lab` builds it first, as `npm test` does). No public image exists
// to fall back on.
import { ConfigError } from "@portable-lb/core";
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const BUILT_LB_IMAGE_RECORD = join(__dirname, "../../../lb-image/.image.json");

/** The LB image this checkout built last: its reference and OCI archive. */
export function builtLbImage(record = BUILT_LB_IMAGE_RECORD): { ref: string; archive: string } {
  let text: string;
  try {
    text = readFileSync(record, "utf8");
  } catch {
    throw new ConfigError(
      `environment.kind: lab runs the LB image built from this checkout, but ${record} does not exist (got nothing); run 'npm run image' (npm run lab does it first)`,
    );
  }
  const { ref, archive } = JSON.parse(text) as { ref: string; archive: string };
  return { ref, archive };
}
