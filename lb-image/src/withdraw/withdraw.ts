// The speaker container's preStop: asks the controller (same pod, so loopback) to stop announcing
// the VIPs and waits for its answer, so the kubelet sends SIGTERM only after the withdrawal went
// out. When the controller does not answer (dead, hung, or failing), it withdraws through BIRD's
// socket itself, so this path works alone: it revokes the announcement lease (the speaker's
// watchdog then keeps every VIP back), disables the VIPs' protocol and waits until no session
// exports a route.
import { LB_HTTP_PATHS } from "@portable-lb/core/config/lbImage";
import { AnnouncementLease } from "../bgp/announcementLease.ts";
import { birdNotRunning, type BirdControl, waitUntilWithdrawn } from "../bgp/birdControl.ts";

export type WithdrawResult = { ok: true; answer: string } | { ok: false; error: string };

/** The controller's /prestop on loopback. */
export function prestopUrl(port: number): string {
  return `http://127.0.0.1:${port}${LB_HTTP_PATHS.prestop}`;
}

/** GET `url` and wait at most `timeoutMs` for a 2xx answer. */
export async function askController(url: string, timeoutMs: number): Promise<WithdrawResult> {
  let res: Response;
  let body: string;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    body = (await res.text()).trim();
  } catch (err) {
    const e = err as Error & { cause?: Error };
    const why =
      e.name === "TimeoutError" ? `no answer within ${timeoutMs / 1000} s` : (e.cause?.message ?? e.message);
    return { ok: false, error: `the controller did not withdraw (${url}): ${why}` };
  }
  if (!res.ok)
    return { ok: false, error: `the controller could not withdraw (${url}, HTTP ${res.status}): ${body}` };
  return { ok: true, answer: body };
}

/** Withdraws every VIP through BIRD's socket and waits (at most `timeoutMs`) until none is exported. */
export async function withdrawThroughBird(
  bird: BirdControl,
  runDir: string,
  timeoutMs: number,
): Promise<WithdrawResult> {
  const lease = new AnnouncementLease({ runDir, holder: "preStop" });
  try {
    await lease.revoke("the pod is stopping and its controller did not withdraw");
  } catch (err) {
    // The watchdog then keeps following the controller's lease; the disable below still withdraws.
    return withdrawn(bird, timeoutMs, `cannot revoke the announcement lease (${(err as Error).message})`);
  }
  return withdrawn(bird, timeoutMs);
}

async function withdrawn(bird: BirdControl, timeoutMs: number, warning?: string): Promise<WithdrawResult> {
  const note = warning ? `; ${warning}` : "";
  try {
    await bird.run(["disable", "vips"]);
  } catch (err) {
    if (birdNotRunning(err)) return { ok: true, answer: `BIRD is not running: nothing is announced${note}` };
    return { ok: false, error: `cannot disable the VIPs through BIRD (${(err as Error).message})${note}` };
  }
  try {
    await waitUntilWithdrawn(bird, timeoutMs);
  } catch (err) {
    return { ok: false, error: `${(err as Error).message}${note}` };
  }
  return { ok: true, answer: `withdrawn through BIRD${note}` };
}
