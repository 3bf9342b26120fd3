// The bootstrap's build of the DSR fast path (scripts/bootstrap/fastpath.sh, found through
// PORTABLE_LB_FASTPATH from scripts/toolenv.sh): the loader and the decapsulation object the LB
// image ships, for the tests that run them outside the image.
import { existsSync } from "node:fs";
import { join } from "node:path";

/** Where the build's files are (present once the bootstrap ran). */
export function fastPathBuild(): { loader: string; decapObject: string } {
  const dir = process.env.PORTABLE_LB_FASTPATH ?? "";
  return { loader: join(dir, "bin/portable-lb-fastpath"), decapObject: join(dir, "lib/dsr_decap.o") };
}

/** The build's files, or an error naming what is missing and what builds it. */
export function builtFastPath(): ReturnType<typeof fastPathBuild> {
  const build = fastPathBuild();
  for (const file of Object.values(build))
    if (!existsSync(file))
      throw new Error(`no ${file}: scripts/bootstrap.sh builds the fast path (PORTABLE_LB_FASTPATH)`);
  return build;
}
