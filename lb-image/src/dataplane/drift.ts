// Drift: what a read-back of the kernel found that differs from what this controller applied. A
// reader reports it instead of throwing, so that a table it cannot make sense of is replaced, never
// looped on.

/** Metric label and log field: what kind of difference. */
export type DriftKind =
  /** The engine's table (or all its state) is gone. */
  | "missing"
  /** The engine's own frame changed: a base chain, its hook, policy or rule; the dispatch map. */
  | "base"
  /** Something the engine never makes: a chain, set, rule, map element or route of someone else. */
  | "foreign"
  /** A service is missing, extra, or holds other backends than applied. */
  | "service"
  /** Output the reader does not understand. */
  | "unparseable"
  /** A local VIP route is missing, or one in the VIP pools that should not be there is. */
  | "route";

export interface Drift {
  kind: DriftKind;
  /** What was found, for the log: names the object and what is wrong with it. */
  detail: string;
  /**
   * Only replacing the whole state repairs it (a diff cannot: it would build on what is broken).
   * A service's own difference is repaired by diff.
   */
  rebuild: boolean;
  /** The service (its key) or VIP it concerns; none: it concerns every service. */
  subject?: string;
}

/** What a verification found and did. */
export interface VerifyReport {
  drift: Drift[];
  /** Statements sent to repair (0: nothing differed, or nothing could be read to compare with). */
  repaired: number;
  /** The whole state was replaced. */
  rebuilt: boolean;
  /** A full read of the kernel (not only the engine's cheap check). */
  full: boolean;
  durationMs: number;
}

export function driftOf(kind: DriftKind, detail: string, subject?: string): Drift {
  return { kind, detail, rebuild: kind !== "service" && kind !== "route", ...(subject && { subject }) };
}

/** How far a verification goes. */
export type VerifyMode =
  /** What the last apply changed, and the frame every service relies on (after each apply). */
  | "changed"
  /** The engine's cheap check of everything it can see without a full listing. */
  | "quick"
  /** A full, strict read of the kernel. */
  | "full";

/** A repair that failed: what was found, and why it could not be repaired. */
export class RepairError extends Error {
  readonly report: VerifyReport;
  constructor(message: string, report: VerifyReport, options?: { cause?: unknown }) {
    super(message, options);
    this.report = report;
  }
}

/** The drift's kinds with their counts, for a log line. */
export function countByKind(drift: Drift[]): Partial<Record<DriftKind, number>> {
  const counts: Partial<Record<DriftKind, number>> = {};
  for (const d of drift) counts[d.kind] = (counts[d.kind] ?? 0) + 1;
  return counts;
}
