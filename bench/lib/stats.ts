// Summaries of latency samples and of the controller's Prometheus text.

export interface Summary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile (p in 0..100) of ascending `sorted`; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.at(-1) ?? NaN,
    mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
  };
}

/** Samples of a Prometheus text exposition, keyed by name plus labels as written (`a{le="0.1"}`). */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    out.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return out;
}

export interface HistogramView {
  count: number;
  sum: number;
  /** Upper bound → cumulative count. */
  buckets: [number, number][];
}

/** A histogram's samples in `after` minus those in `before` (the runs in between). */
export function histogramDelta(
  name: string,
  before: Map<string, number>,
  after: Map<string, number>,
): HistogramView {
  const delta = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
  const buckets: [number, number][] = [];
  for (const key of after.keys()) {
    const m = new RegExp(`^${name}_bucket\\{(?:.*,)?le="([^"]+)"`).exec(key);
    if (m) buckets.push([m[1] === "+Inf" ? Infinity : Number(m[1]), delta(key)]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  return { count: delta(`${name}_count`), sum: delta(`${name}_sum`), buckets };
}

/** Quantile q (0..1) by linear interpolation inside its bucket, as PromQL's histogram_quantile. */
export function histogramQuantile(h: HistogramView, q: number): number {
  if (h.count === 0) return NaN;
  const rank = q * h.count;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [bound, cumulative] of h.buckets) {
    if (cumulative >= rank) {
      if (bound === Infinity) return lowerBound;
      const inBucket = cumulative - lowerCount;
      return inBucket === 0 ? bound : lowerBound + (bound - lowerBound) * ((rank - lowerCount) / inBucket);
    }
    lowerBound = bound;
    lowerCount = cumulative;
  }
  return lowerBound;
}

/** A small seeded PRNG (mulberry32): the same seed picks the same changes on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
