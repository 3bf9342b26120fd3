// Small helpers over client-node's generated API: JSON merge patches (the generated patch calls
// default to JSON Patch), the HTTP status of a failed call, and Lease times with microseconds.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";

/** Call options that send a body as a JSON merge patch (RFC 7386). */
export const MERGE_PATCH = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** The HTTP status of a failed API call (ApiException.code), if it had one. */
export function httpStatus(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}

/**
 * A MicroTime as the API server insists on it (six fractional digits). Sent as a string: the
 * client passes strings through where the model says Date.
 */
export function microTime(ms: number = Date.now()): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
