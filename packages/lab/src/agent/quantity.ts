// Kubernetes resource quantities ("100m", "1.5", "128Mi", "1e3"), for resourceFieldRef values and the
// Node's capacity. Numbers in JavaScript doubles are exact far beyond any real CPU or memory size.

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

export class QuantityError extends Error {}

/** The value of a quantity, e.g. "250m" → 0.25, "1Ki" → 1024, "1e3" → 1000. */
export function parseQuantity(q: string | number): number {
  if (typeof q === "number") return q;
  const m = /^([+-]?[0-9]*\.?[0-9]+)(?:([eE][+-]?[0-9]+)|(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?)$/.exec(
    q.trim(),
  );
  if (!m) throw new QuantityError(`"${q}" is not a resource quantity`);
  const base = Number(m[1]);
  if (m[2] !== undefined) return base * 10 ** Number(m[2].slice(1));
  return base * SUFFIXES[m[3] ?? ""]!;
}

/**
 * A resource as the downward API reports it: the quantity divided by the divisor, rounded up to a
 * whole number (the kubelet's rule, so 250m of cpu with divisor 1 is "1").
 */
export function divideUp(value: number, divisor: number): string {
  if (divisor <= 0) throw new QuantityError(`divisor must be positive (got ${divisor})`);
  // Rounded to 1e-9 first so that 0.25 / 0.001 (= 250.00000000000003) does not become 251.
  return String(Math.ceil(Math.round((value / divisor) * 1e9) / 1e9));
}
