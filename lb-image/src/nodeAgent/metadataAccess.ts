// The LB pods' way to their cloud credentials. On cloud machines the bootstrap's metadata guard (an
// nft table) keeps pods from the instance metadata service, which serves the machine's bootstrap
// script and credentials; only the addresses in its set `lb_pods` get through. In the cloud-routes
// mode the LB pods need those credentials to write the cloud's routes, so the agent keeps that set to
// exactly its node's LB pods; in the BGP mode no pod needs them and the set stays empty. A node
// without the guard (on premises, the lab, a cluster made by others) has no such set: nothing to do.
import { METADATA_GUARD, type LbConfig } from "@portable-lb/core/config";
import { z } from "zod";
import { CommandError, run } from "../dataplane/exec.ts";

const SET_ARGS = ["inet", METADATA_GUARD.table, METADATA_GUARD.lbPodsSet];
const SET = SET_ARGS.join(" ");

/** The addresses to let through: the node's LB pods in the cloud-routes mode, else none. */
export function desiredMetadataAccess(
  routingMode: LbConfig["routingMode"],
  lbPodIps: readonly string[],
): string[] {
  return routingMode === "cloud-routes" ? [...new Set(lbPodIps)].sort() : [];
}

const listingSchema = z.object({
  nftables: z.array(z.object({ set: z.object({ elem: z.array(z.string()).optional() }).optional() }).loose()),
});

/** `nft -j list set …` → the set's addresses, sorted. */
export function parseAccessSet(json: string): string[] {
  return listingSchema
    .parse(JSON.parse(json))
    .nftables.flatMap((o) => o.set?.elem ?? [])
    .sort();
}

/** What `nft -f` must run to turn `current` into `want` (empty when they are the same). */
export function accessScript(current: readonly string[], want: readonly string[]): string {
  const add = want.filter((a) => !current.includes(a));
  const remove = current.filter((a) => !want.includes(a));
  return [
    ...(remove.length ? [`delete element ${SET} { ${remove.join(", ")} }`] : []),
    ...(add.length ? [`add element ${SET} { ${add.join(", ")} }`] : []),
  ]
    .map((l) => `${l}\n`)
    .join("");
}

export type AccessResult =
  /** The node has no guard. */
  "unguarded" | "unchanged" | "changed";

/** Makes the guard's set hold exactly `want`, by diff. */
export async function applyMetadataAccess(
  nft: [string, ...string[]],
  want: readonly string[],
): Promise<AccessResult> {
  let current: string[];
  try {
    current = parseAccessSet(await run([...nft, "-j", "list", "set", ...SET_ARGS]));
  } catch (err) {
    if (err instanceof CommandError && /No such file or directory/.test(err.stderr)) return "unguarded";
    throw err;
  }
  const script = accessScript(current, want);
  if (!script) return "unchanged";
  await run([...nft, "-f", "-"], script);
  return "changed";
}
