// The Grafana dashboard asks only for what exists: every metric its queries name is one the LB image
// defines (prom-client's `name:` in lb-image/src), each `by (...)` label one that metric has (or one
// Prometheus adds to every scraped series), and a histogram's series are asked by their suffixes.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../../test/harness/repoRoot.ts";

interface Defined {
  type: string;
  labels: string[];
}

/** Every metric the LB image's sources define, with its type and label names. */
function definedMetrics(): Map<string, Defined> {
  const metrics = new Map<string, Defined>();
  const dir = join(repoRoot(), "lb-image/src");
  for (const file of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    if (!file.endsWith(".ts") || file.endsWith(".test.ts")) continue;
    const text = readFileSync(join(dir, file), "utf8");
    for (const m of text.matchAll(/new (Gauge|Counter|Histogram|Summary)\b[^(]*\(\{([\s\S]*?)\}\)/g)) {
      const name = /name: "(portable_lb_[a-z_]+)"/.exec(m[2]!)?.[1];
      if (!name) continue;
      const labels = /labelNames: \[([^\]]*)\]/.exec(m[2]!)?.[1] ?? "";
      metrics.set(name, { type: m[1]!, labels: [...labels.matchAll(/"([a-z_]+)"/g)].map((l) => l[1]!) });
    }
  }
  // A helper that makes counters of the names it is given (the fast path's packet counters).
  for (const name of ["portable_lb_fast_path_packets_total", "portable_lb_node_fast_path_packets_total"])
    metrics.set(name, { type: "Counter", labels: ["result"] });
  return metrics;
}

/** Labels Prometheus puts on every series it scrapes, and the histogram's bucket label. */
const SCRAPE_LABELS = ["instance", "job", "pod", "namespace", "node"];

const dashboard = JSON.parse(
  readFileSync(join(repoRoot(), "examples/grafana/portable-lb-dashboard.json"), "utf8"),
) as { panels: { title: string; targets: { expr: string }[] }[] };
const queries = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));

describe("the Grafana dashboard", () => {
  const metrics = definedMetrics();

  it("finds the metrics the LB image defines (the reader works)", () => {
    expect(metrics.get("portable_lb_vip_connections_total")).toEqual({
      type: "Counter",
      labels: ["vip", "port", "protocol"],
    });
    expect(metrics.get("portable_lb_reconcile_duration_seconds")?.type).toBe("Histogram");
    expect(metrics.size).toBeGreaterThan(40);
  });

  it.each(queries)("$panel: names only real metrics and their labels", ({ expr }) => {
    const named = [...expr.matchAll(/\bportable_lb_[a-z_]+/g)].map((m) => m[0]);
    expect(named.length).toBeGreaterThan(0);
    for (const series of named) {
      const histogram = /^(.*)_(bucket|sum|count)$/.exec(series);
      const base = histogram && metrics.get(histogram[1]!)?.type === "Histogram" ? histogram[1]! : series;
      const defined = metrics.get(base);
      expect({ series, defined: defined !== undefined }).toEqual({ series, defined: true });
      const allowed = [...defined!.labels, ...SCRAPE_LABELS, ...(histogram ? ["le"] : [])];
      for (const by of expr.matchAll(/\bby \(([^)]*)\)/g))
        for (const label of by[1]!.split(",").map((l) => l.trim()))
          expect({ series, label, known: allowed.includes(label) }).toEqual({ series, label, known: true });
    }
  });
});
