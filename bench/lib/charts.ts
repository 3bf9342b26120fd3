// Charts for the benchmarks' results: a Vega-Lite spec rendered headless to SVG by Vega, and to
// PNG by resvg (no browser, no canvas library), both written beside the results.
import { writeFileSync } from "node:fs";
import { Resvg } from "@resvg/resvg-js";
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** Writes `<base>.svg` and `<base>.png`; returns the PNG's path. */
export async function writeChart(spec: TopLevelSpec, base: string): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  writeFileSync(`${base}.svg`, svg);
  const png = new Resvg(svg, {
    background: "white",
    font: { loadSystemFonts: true },
    fitTo: { mode: "zoom", value: 2 },
  })
    .render()
    .asPng();
  writeFileSync(`${base}.png`, png);
  return `${base}.png`;
}
