// The repository's root folder, for harness code that runs its files (launchers, helper scripts).
// Jest runs the harness compiled to CommonJS (__dirname); the benchmarks load it as ESM under Node,
// where the working directory (the repository or below it) is the only anchor left.
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

export function repoRoot(): string {
  const start = typeof __dirname === "string" ? __dirname : process.cwd();
  for (let dir = resolve(start); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "lb-image/bin")) && existsSync(join(dir, "test/harness"))) return dir;
    if (dirname(dir) === dir) throw new Error(`cannot find the portable-lb repository above ${start}`);
  }
}
