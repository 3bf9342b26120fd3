// The test side of httpEcho.ts: starting echo backends in lab namespaces, and sending a bounded
// number of requests from a namespace to count which backend answered each. Every request opens
// its own connection (new source port), so ECMP and L4-hashing load balancers see distinct flows.
import { join } from "node:path";
import { repoRoot } from "../repoRoot.ts";
import type { LabNamespace, LabProcess } from "@portable-lb/lab";

export interface HttpEchoOptions {
  port?: number;
  /** Listen address; default 0.0.0.0. */
  host?: string;
  /** Reported in X-Backend-Name; default the accepting address. */
  name?: string;
  /** Path of httpEcho.ts (default: beside this file). */
  script?: string;
}

/** Starts httpEcho.ts inside `ns` with this Node, and resolves once it listens. */
export function startHttpEcho(ns: LabNamespace, opts: HttpEchoOptions = {}): Promise<LabProcess> {
  const port = opts.port ?? 8080;
  const script = opts.script ?? join(repoRoot(), "test/harness/netns/httpEcho.ts");
  const args = [script, "--port", String(port)];
  if (opts.host !== undefined) args.push("--host", opts.host);
  if (opts.name !== undefined) args.push("--name", opts.name);
  return ns.spawn(
    `http-echo-${port}`,
    process.execPath,
    ["--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", ...args],
    { marker: `${script} --port ${port}`, waitForPort: port },
  );
}

export interface HistogramOptions {
  /** Requests to send, 1-10000; default 100. */
  count?: number;
  /** Bound on each request (connect and transfer); default 2 s. */
  requestTimeoutMs?: number;
  /** Bound on the whole run; default count × requestTimeoutMs + 10 s. Requests not sent by then count as failures. */
  totalTimeoutMs?: number;
  /**
   * Count by the backend's accepting address (X-Backend), its --name (X-Backend-Name), or the
   * address the request reached it from (X-Client: the LB, which SNATs); default address.
   */
  by?: By;
}

export interface Histogram {
  /** Answers per backend, e.g. { "10.244.1.5": 34, "10.244.2.7": 66 }. */
  counts: Record<string, number>;
  answered: number;
  failures: number;
  /** Distinct failure reasons with how often each occurred. */
  errors: Record<string, number>;
  elapsedMs: number;
}

type By = "address" | "name" | "client";
const MAX_REQUESTS = 10_000;
// One line per request from curl's write-out: status, the two echo headers, curl's exit code and error.
const WRITE_OUT =
  "%{http_code}\\t%header{x-backend}\\t%header{x-backend-name}\\t%header{x-client}\\t%{exitcode}\\t%{errormsg}\\n";

/**
 * Sends `count` GETs to `url` from inside `ns` (one curl process, a new connection per request)
 * and counts the answers per backend.
 */
export async function httpHistogram(
  ns: LabNamespace,
  url: string,
  opts: HistogramOptions = {},
): Promise<Histogram> {
  const count = opts.count ?? 100;
  if (!Number.isInteger(count) || count < 1 || count > MAX_REQUESTS) {
    throw new Error(`httpHistogram: count must be 1-${MAX_REQUESTS} (got ${count})`);
  }
  const perRequest = opts.requestTimeoutMs ?? 2_000;
  const started = Date.now();
  const seconds = String(perRequest / 1000);
  const config = `url = "${url}"\noutput = "/dev/null"\n`.repeat(count);
  const result = await ns.exec(
    "curl",
    // -q: ignore ~/.curlrc; --noproxy: never send lab traffic to a proxy from the environment.
    [
      "-q",
      "-s",
      "--noproxy",
      "*",
      "-H",
      "Connection: close",
      "--connect-timeout",
      seconds,
      "--max-time",
      seconds,
    ].concat(["-w", WRITE_OUT, "--config", "-"]),
    { input: config, timeoutMs: opts.totalTimeoutMs ?? count * perRequest + 10_000 },
  );
  const histogram = parseWriteOut(result.stdout, count, opts.by ?? "address");
  if (result.code === 127 || (result.code !== 0 && histogram.answered + histogram.failures === 0)) {
    throw new Error(
      `httpHistogram: curl in ${ns.netns} failed (exit ${result.code}): ${result.stderr.trim()}`,
    );
  }
  return { ...histogram, elapsedMs: Date.now() - started };
}

/** Turns curl's write-out lines into a histogram; requests with no line (a total timeout) count as failures. */
export function parseWriteOut(stdout: string, count: number, by: By): Omit<Histogram, "elapsedMs"> {
  const counts: Record<string, number> = {};
  const errors: Record<string, number> = {};
  let answered = 0;
  const lines = stdout.split("\n").filter((l) => l !== "");
  for (const line of lines) {
    const [status = "", address = "", name = "", client = "", exit = "", message = ""] = line.split("\t");
    const key = { address, name, client }[by];
    if (/^2\d\d$/.test(status) && key !== "") {
      counts[key] = (counts[key] ?? 0) + 1;
      answered++;
    } else {
      const reason = status === "000" ? `curl exit ${exit}: ${message}` : `HTTP ${status} without X-Backend`;
      errors[reason] = (errors[reason] ?? 0) + 1;
    }
  }
  const missing = Math.max(0, count - lines.length);
  if (missing > 0) errors["not sent within the total time"] = missing;
  return { counts, answered, failures: count - answered, errors };
}

/**
 * GET http://<host>:<port><path> from inside `ns` (by default 127.0.0.1: a pod's own ports, which
 * only its loopback sees), within `timeoutMs`. With curl, which starts in milliseconds: a kubelet
 * sends its probes and preStop GETs from its own process, so a Node process started per request
 * (100+ ms under load) would be measured as the LB's time.
 */
export async function getInside(
  ns: LabNamespace,
  port: number,
  path: string,
  { host = "127.0.0.1", timeoutMs = 10_000 }: { host?: string; timeoutMs?: number } = {},
): Promise<{ status: number; body: string }> {
  const url = `http://${host}:${port}${path}`;
  const r = await ns.exec(
    "curl",
    ["-sS", "--max-time", String(timeoutMs / 1000), "-w", "\n%{http_code}", url],
    {
      timeoutMs: timeoutMs + 5_000,
    },
  );
  if (r.code !== 0) throw new Error(`GET ${url} in ${ns.netns}: curl exit ${r.code}: ${r.stderr.trim()}`);
  const cut = r.stdout.lastIndexOf("\n");
  return { status: Number(r.stdout.slice(cut + 1)), body: r.stdout.slice(0, cut) };
}
