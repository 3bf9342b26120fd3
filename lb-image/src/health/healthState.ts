// The health of one checked backend, as HAProxy counts it: `fall` failures in a row take it out of
// new flows, `rise` successes in a row bring it back. A new target starts healthy, so turning checks
// on (or restarting the controller) never drains a service before its first verdicts.
import type { HealthCheckSpec } from "@portable-lb/core/config";

export interface TargetHealth {
  healthy: boolean;
  /** Results in a row that disagree with `healthy`. */
  streak: number;
}

export const INITIAL_HEALTH: TargetHealth = { healthy: true, streak: 0 };

export function nextHealth(
  h: TargetHealth,
  ok: boolean,
  spec: Pick<HealthCheckSpec, "fall" | "rise">,
): TargetHealth {
  if (ok === h.healthy) return { healthy: h.healthy, streak: 0 };
  const streak = h.streak + 1;
  return streak >= (h.healthy ? spec.fall : spec.rise)
    ? { healthy: ok, streak: 0 }
    : { healthy: h.healthy, streak };
}

/** One backend checked the way one Service asks; the same ip:port may be checked by two Services. */
export interface HealthTarget {
  ip: string;
  port: number;
  spec: HealthCheckSpec;
}

export function targetId(t: HealthTarget): string {
  const s = t.spec;
  return `${t.ip}:${t.port} ${s.kind}${s.path ?? ""} ${s.intervalMs}/${s.timeoutMs}/${s.fall}/${s.rise}`;
}
