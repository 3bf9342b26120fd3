// The backend pods' tc BPF decapsulation object (lb-image/fastpath/bpf/dsr_decap.c) for tests
// outside the image, compiled from the source as lb-image/fastpath/build.sh compiles it.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "../repoRoot.ts";

/** Compiles dsr_decap.c into `dir`; returns the object's path. */
export function buildDecapObject(dir: string): string {
  const out = join(dir, "dsr_decap.o");
  execFileSync(
    process.env.CLANG ?? "clang-14",
    [
      ..."-O2 -g -Wall -Werror -target bpf -I/usr/include/x86_64-linux-gnu -c".split(" "),
      join(repoRoot(), "lb-image/fastpath/bpf/dsr_decap.c"),
      "-o",
      out,
    ],
    { timeout: 60_000 },
  );
  return out;
}
