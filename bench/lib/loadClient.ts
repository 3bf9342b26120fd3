// Runs the keep-alive load client (keepAliveClient.ts) inside a namespace, usually the lab's client,
// and hands back what it measured.
import { join } from "node:path";
import { execCommand } from "@portable-lb/lab";
import { repoRoot } from "../../test/harness/repoRoot.ts";

export interface LoadOptions {
  urls: string[];
  /** How requests spread over several urls (see keepAliveClient.ts): connection i to the i-th, or each at random. */
  spread?: "fixed" | "random";
  connections: number;
  seconds: number;
  /** Between one connection's requests; 0 sends them back to back (throughput). */
  intervalMs: number;
  /** A new connection for every request (see keepAliveClient.ts). */
  fresh?: boolean;
  /** Each request a connection of its own, its header sent over this long (see keepAliveClient.ts). */
  trickleMs?: number;
  /** Resolves the urls' names at this DNS server for every new connection (see keepAliveClient.ts). */
  dnsServer?: string;
  /** Ends the run before `seconds` (what was measured so far is still returned). */
  stop?: AbortSignal;
}

export interface LoadResult {
  /** When the client started (epoch ms). */
  started: number;
  requests: number;
  /** Requests answered in each second of the run. */
  perSecond: number[];
  opened: number;
  /** Each with its connection's index: a connection that fails is reopened under the same index. */
  failures: { t: number; code: string; connection: number }[];
  /** With `dnsServer`: how often each address was the answer. */
  resolved: Record<string, number>;
}

export async function runLoad(netns: string, o: LoadOptions): Promise<LoadResult> {
  const out = await execCommand(
    "ip",
    [
      ...["netns", "exec", netns, process.execPath, "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON"],
      join(repoRoot(), "bench/lib/keepAliveClient.ts"),
      ...o.urls.flatMap((u) => ["--url", u]),
      ...(o.spread ? ["--spread", o.spread] : []),
      ...["--connections", String(o.connections), "--interval-ms", String(o.intervalMs)],
      ...["--seconds", String(o.seconds)],
      ...(o.fresh ? ["--fresh"] : []),
      ...(o.trickleMs ? ["--trickle-ms", String(o.trickleMs)] : []),
      ...(o.dnsServer ? ["--dns-server", o.dnsServer] : []),
    ],
    { timeoutMs: (o.seconds + 60) * 1000, signal: o.stop },
  );
  const last = out.stdout.trim().split("\n").pop() ?? "";
  if (out.code !== 0 || !last.startsWith("{"))
    throw new Error(`load client failed: ${out.stderr}${out.stdout}`);
  return JSON.parse(last) as LoadResult;
}

/** The failures counted by their error code (or message). */
export function countCodes(failures: readonly { code: string }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const f of failures) counts[f.code] = (counts[f.code] ?? 0) + 1;
  return counts;
}
