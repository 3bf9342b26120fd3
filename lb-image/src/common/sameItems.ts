// Whether two arrays hold the same objects in the same order: how the controller tells that watch
// cache contents did not change since its last run (a change always replaces the object).
export function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
