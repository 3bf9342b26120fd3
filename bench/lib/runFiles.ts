// A benchmark run's files: a folder bench/results/<name>-<time>/ holding report.txt (what the run
// printed), summary.json, the raw data as CSV and its chart (PNG and SVG).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TopLevelSpec } from "vega-lite";
import { writeChart } from "./charts.ts";

export function newRunDir(out: string, name: string): string {
  const dir = join(out, `${name}-${new Date().toISOString().slice(0, 19).replace(/:/g, "-")}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

export interface RunFiles {
  report: string;
  summary: unknown;
  csv: { name: string; header: string; rows: string[] };
  chart: { name: string; spec: TopLevelSpec };
}

/** Prints the report, writes every file, and says where they are. */
export async function writeRunFiles(dir: string, f: RunFiles): Promise<void> {
  console.log(f.report);
  writeFileSync(join(dir, "report.txt"), `${f.report}\n`);
  writeFileSync(join(dir, "summary.json"), JSON.stringify(f.summary, null, 2));
  writeFileSync(join(dir, f.csv.name), [f.csv.header, ...f.csv.rows].join("\n") + "\n");
  const png = await writeChart(f.chart.spec, join(dir, f.chart.name));
  console.log(`\nwritten: ${dir}/report.txt, summary.json, ${f.csv.name}, ${png}`);
}
