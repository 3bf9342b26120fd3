// "Did you mean …?" for a mistyped key or value: the closest known name, if it is close enough to
// be the one meant. Case is ignored, so "dataplane" finds "dataPlane"; edits are counted by Levenshtein
// distance (the `leven` package).
import leven from "leven";

/** The known name nearest to `typed`, or undefined when none is within a typo's distance. */
export function nearestName(typed: string, known: readonly string[]): string | undefined {
  const lower = typed.toLowerCase();
  // A known name the user began to write ("nft" for "nftables").
  const started = lower.length >= 3 ? known.find((name) => name.toLowerCase().startsWith(lower)) : undefined;
  if (started) return started;
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = leven(lower, name.toLowerCase());
    if (!best || distance < best.distance) best = { name, distance };
  }
  // Up to a third of the word may differ (at least 2 edits): "minRx" → "minRxMs", "backnd" → "backend".
  return best && best.distance <= Math.max(2, Math.floor(typed.length / 3)) ? best.name : undefined;
}
