// The speaker container's preStop: asks the controller (same pod, so loopback) to stop announcing the
// VIPs and waits for its answer, so the kubelet sends SIGTERM only after the withdrawal went out.
import { readFileSync } from "node:fs";
import { LB_HTTP_PATHS, lbConfigSchema } from "@portable-lb/core/config";

export type WithdrawResult = { ok: true; answer: string } | { ok: false; error: string };

/** The controller's /prestop URL from the LB config file (its health port); throws a readable error. */
export function prestopUrl(configFile: string): string {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(configFile, "utf8"));
  } catch (err) {
    throw new Error(`cannot read the LB config ${configFile}: ${(err as Error).message}`, { cause: err });
  }
  const parsed = lbConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`invalid LB config ${configFile}: ${first?.path.join(".")}: ${first?.message}`);
  }
  return `http://127.0.0.1:${parsed.data.ports.health}${LB_HTTP_PATHS.prestop}`;
}

/** GET `url` and wait at most `timeoutMs` for a 2xx answer. */
export async function withdraw(url: string, timeoutMs: number): Promise<WithdrawResult> {
  let res: Response;
  let body: string;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    body = (await res.text()).trim();
  } catch (err) {
    const e = err as Error & { cause?: Error };
    const why =
      e.name === "TimeoutError" ? `no answer within ${timeoutMs / 1000} s` : (e.cause?.message ?? e.message);
    return {
      ok: false,
      error: `the controller did not withdraw (${url}): ${why}; is the controller running?`,
    };
  }
  if (!res.ok)
    return { ok: false, error: `the controller could not withdraw (${url}, HTTP ${res.status}): ${body}` };
  return { ok: true, answer: body };
}
