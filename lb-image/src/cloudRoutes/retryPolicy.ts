// Retries of cloud API calls: exponential backoff with full jitter (AWS's advice for throttling), only
// for the causes worth retrying, bounded in attempts. Our own policy rather than the SDKs' so that
// both clouds behave alike and each retry is counted by cause.
import { CloudCallError, RETRYABLE } from "./failureCause.ts";

export interface RetryPolicy {
  attempts: number;
  baseMs: number;
  capMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 6, baseMs: 100, capMs: 3_000 };

/** The wait before retry `n` (0-based): uniform in [0, min(cap, base * 2^n)]. */
export function backoffMs(policy: RetryPolicy, n: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(policy.capMs, policy.baseMs * 2 ** n));
}

/**
 * Runs `call` until it succeeds, fails with a cause not worth retrying, or runs out of attempts;
 * throws a CloudCallError naming `action` and `resource`. `onRetry` sees each retried failure.
 */
export async function withRetry<T>(
  action: string,
  resource: string,
  call: () => Promise<T>,
  opts: {
    policy?: RetryPolicy;
    onRetry?: (err: CloudCallError) => void;
    sleep?: (ms: number) => Promise<void>;
  } = {},
): Promise<T> {
  const policy = opts.policy ?? DEFAULT_RETRY;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let n = 0; ; n++) {
    try {
      return await call();
    } catch (err) {
      const failure = new CloudCallError(action, resource, err);
      if (!RETRYABLE.has(failure.reason) || n + 1 >= policy.attempts) throw failure;
      opts.onRetry?.(failure);
      await sleep(backoffMs(policy, n));
    }
  }
}
