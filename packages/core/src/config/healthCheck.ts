// Active health checks a Service can ask for beside EndpointSlice readiness, through one annotation:
//   portable-lb.io/health-check: "tcp"                       connect to the endpoint's port
//   portable-lb.io/health-check: "http:/healthz"             GET the path; 2xx/3xx is healthy
//   portable-lb.io/health-check: "http:/healthz interval=2s timeout=1s fall=3 rise=2"
// Defaults follow HAProxy's (inter 2s, fall 3, rise 2): a backend leaves after ~6 s of failures.
import { z } from "zod";

export const HEALTH_CHECK_ANNOTATION = "portable-lb.io/health-check";

export interface HealthCheckSpec {
  kind: "tcp" | "http";
  /** HTTP path, for kind http. */
  path?: string;
  intervalMs: number;
  timeoutMs: number;
  /** Consecutive failures that take a backend out of new flows. */
  fall: number;
  /** Consecutive successes that bring it back. */
  rise: number;
}

const duration = z
  .string()
  .regex(/^\d+(ms|s)$/, { error: "must be a duration like 500ms or 2s" })
  .transform((d) => (d.endsWith("ms") ? Number(d.slice(0, -2)) : Number(d.slice(0, -1)) * 1000))
  .pipe(
    z.number().min(100, { error: "must be at least 100ms" }).max(300_000, { error: "must be at most 300s" }),
  );
const count = z.coerce.number().int().min(1).max(100);

const optionsSchema = z.strictObject({
  interval: duration.default(2_000),
  timeout: duration.default(1_000),
  fall: count.default(3),
  rise: count.default(2),
});

/** Parses the annotation; throws an Error whose message says what is wrong and what is expected. */
export function parseHealthCheck(value: string): HealthCheckSpec {
  const [target = "", ...opts] = value.trim().split(/\s+/);
  const m = /^(tcp|http:(\/\S*))$/.exec(target);
  if (!m) throw new Error(`"${target}" is not a check; use "tcp" or "http:/path"`);
  const pairs = opts.map((o) => {
    const [k, v, ...rest] = o.split("=");
    if (v === undefined || rest.length) throw new Error(`option "${o}" must be key=value`);
    return [k, v];
  });
  const parsed = optionsSchema.safeParse(Object.fromEntries(pairs));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(
      `option ${issue.path.join(".") || "?"}: ${issue.message}; known options: interval, timeout, fall, rise`,
    );
  }
  const o = parsed.data;
  if (o.timeout > o.interval)
    throw new Error(`timeout (${o.timeout}ms) must not exceed interval (${o.interval}ms)`);
  return {
    kind: m[2] ? "http" : "tcp",
    ...(m[2] && { path: m[2] }),
    intervalMs: o.interval,
    timeoutMs: o.timeout,
    fall: o.fall,
    rise: o.rise,
  };
}
