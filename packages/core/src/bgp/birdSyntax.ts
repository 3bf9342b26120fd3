// Pieces of BIRD 2 configuration shared by the route-reflector and upstream-router renderers.
import type { BfdTimers, BgpTimers } from "./types.ts";

/**
 * A BIRD string literal. BIRD 2.0.12's lexer has no escape sequences: a string runs to the next
 * `"` and backslashes stay literal, so a quote or a line break cannot be written at all.
 */
export function birdString(value: string, what: string): string {
  if (/["\p{Cc}]/u.test(value)) {
    throw new Error(
      `${what} cannot contain a double quote or a control character: BIRD strings have no escapes`,
    );
  }
  return `"${value}"`;
}

/** Indents each line of a block by `depth` levels of two spaces (blank lines stay empty). */
export function indent(lines: readonly string[], depth = 1): string[] {
  const pad = "  ".repeat(depth);
  return lines.map((line) => (line === "" ? "" : pad + line));
}

/**
 * `protocol bfd` with the same timers for single-hop sessions (peers on a shared network) and,
 * when `multihop`, for multihop sessions: BIRD takes multihop timers only from that block.
 */
export function birdBfdProtocol(bfd: BfdTimers, multihop: boolean): string[] {
  const block = (comment: string, header: string): string[] => [
    `# ${comment}`,
    `${header} {`,
    ...indent([
      `min rx interval ${bfd.minRxMs} ms;`,
      `min tx interval ${bfd.minTxMs} ms;`,
      `multiplier ${bfd.multiplier};`,
    ]),
    "};",
  ];
  return [
    `# BFD declares a silent peer dead after ${bfd.multiplier} missed packets, long before the BGP hold time.`,
    "protocol bfd {",
    ...indent(block("Single-hop sessions: peers on a shared network.", 'interface "*"')),
    ...(multihop
      ? indent(block("Multihop sessions: LB speakers reached through the overlay.", "multihop"))
      : []),
    "}",
  ];
}

export interface BirdSessionOptions {
  timers: BgpTimers;
  /** Restart time we advertise; BIRD's default (120 s) when omitted. */
  gracefulRestartS?: number;
  password?: string;
}

/** Statements every portable-lb BGP session carries: BFD, timers, graceful restart, retry, MD5. */
export function birdSessionStatements(options: BirdSessionOptions): string[] {
  const { timers, gracefulRestartS, password } = options;
  if (password === "") throw new Error("BGP password must not be empty; omit it to disable MD5");
  return [
    "bfd on;",
    `hold time ${timers.holdTimeS};`,
    `keepalive time ${timers.keepaliveS};`,
    "# Peers keep our routes while BIRD restarts with -R (and we keep theirs); a BFD failure",
    "# still tears the session down at once, so a dead peer's routes do not linger.",
    "graceful restart on;",
    ...(gracefulRestartS === undefined ? [] : [`graceful restart time ${gracefulRestartS};`]),
    "# Retry 1-2 s after an error instead of 60-300 s, or a restarted peer is refused for minutes.",
    "error wait time 1, 2;",
    "# Connect as soon as the session starts: a new LB pod's VIPs must reach the router in well",
    "# under a second. Stock BIRD still waits 0.75-1 s; the LB image's build (lb-image/bird) makes",
    "# 0 mean at once.",
    "connect delay time 0;",
    ...(password === undefined ? [] : [`password ${birdString(password, "BGP password")};`]),
  ];
}

/**
 * One iBGP protocol per neighbor, `<template>_<n>`, everything else coming from the template but
 * what `body` adds for a neighbor.
 */
export function birdSessions(
  template: string,
  neighbors: readonly string[],
  body: (neighbor: string) => string[] = () => [],
): string[] {
  return neighbors.flatMap((neighbor, i) => [
    "",
    `protocol bgp ${template}_${i + 1} from ${template} {`,
    ...indent([`neighbor ${neighbor} internal;`, ...body(neighbor)]),
    "}",
  ]);
}

/** The start of every portable-lb BIRD config: what it is (comment lines), router id, interfaces. */
export function birdPreamble(about: readonly string[], routerId: string): string[] {
  return [
    ...about.map((line) => `# ${line}`),
    "",
    `router id ${routerId};`,
    "",
    "protocol device {",
    ...indent(["scan time 10;"]),
    "}",
  ];
}
