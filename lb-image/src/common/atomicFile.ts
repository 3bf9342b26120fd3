// A file that readers in another process see either whole before or whole after a change: written
// beside its name, then renamed over it (rename is atomic within a filesystem).
import { rename, writeFile } from "node:fs/promises";

/**
 * Replaces `path` with `content`. `writer` names the temporary file, so two processes writing the
 * same file never write into each other's.
 */
export async function writeFileAtomic(path: string, content: string, writer: string, mode = 0o644) {
  const next = `${path}.${writer}.tmp`;
  await writeFile(next, content, { mode });
  await rename(next, path);
}
