// Waits (bounded) for a condition an integration test expects to become true, failing the test if not.
import { waitUntil } from "@portable-lb/lab";

export async function settle(check: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  expect(await waitUntil(check, timeoutMs, 200)).toBe(true);
}
