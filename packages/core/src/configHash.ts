// Pods read their config files once at start, so a pod template carries a hash of its config:
// a changed config changes the template, and the workload rolls its pods.
import { createHash } from "node:crypto";

export const CONFIG_HASH_ANNOTATION = "portable-lb.io/config-hash";

export function configHash(...contents: string[]): string {
  const h = createHash("sha256");
  for (const c of contents) h.update(c).update("\0");
  return h.digest("hex").slice(0, 16);
}
