// BGP settings shared by the LB speakers, the route reflectors and the upstream-router snippets.
import { z } from "zod";

// 0 and 65535/4294967295 are reserved, 23456 is AS_TRANS (RFC 6793): none may name a real AS.
const RESERVED_ASNS = new Set([0, 23456, 65535, 4294967295]);

export const asn = z
  .number({ error: "must be a number" })
  .int({ error: "must be a whole number" })
  .refine((n) => n >= 1 && n <= 4294967295 && !RESERVED_ASNS.has(n), {
    error: "is not a usable AS number; use a private ASN in 64512-65534 or 4200000000-4294967294",
  });

export const bfdSchema = z.strictObject({
  // Below 10 ms a software BFD on a busy node flaps; above 10 s BFD is pointless next to BGP hold.
  minRxMs: z.number().int().min(10).max(10_000).default(300),
  minTxMs: z.number().int().min(10).max(10_000).default(300),
  multiplier: z.number().int().min(2).max(255).default(3),
});

export const bgpTimersSchema = z
  .strictObject({
    holdTimeS: z.number().int().min(3).max(65535).default(9),
    keepaliveS: z.number().int().min(1).max(21845).default(3),
  })
  .refine((t) => t.keepaliveS * 3 <= t.holdTimeS, {
    error: "keepaliveS must be at most a third of holdTimeS (RFC 4271 recommends hold = 3 × keepalive)",
    path: ["keepaliveS"],
  });

export type BfdSettings = z.output<typeof bfdSchema>;
export type BgpTimerSettings = z.output<typeof bgpTimersSchema>;
