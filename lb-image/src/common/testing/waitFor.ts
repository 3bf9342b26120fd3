// Polls `check` every 20 ms until it holds or `ms` passes; returns whether it held (tests only).
export async function waitFor(check: () => boolean, ms = 5_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return check();
}
