// Waits until a new cluster's API server says it is ready (GET /readyz answers 200), asking over
// TLS pinned to the cluster's own CA with the admin client certificate, both from its kubeconfig:
// a machine that merely answers on the address, or a man in the middle, is never taken for it.
// Bounded in time; the error names the endpoint, what it last saw and where to look.
import { request, type Agent, type RequestOptions } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";

/** How long a kubeadm cluster may take from its machines' creation to a ready API server. */
export const API_SERVER_WAIT_S = 900;
const ATTEMPT_TIMEOUT_MS = 5_000;
// The attempt at the deadline still gets this long: one clipped to a millisecond would only ever
// report its own timeout, hiding what the server last said (a refused certificate, an HTTP status).
const MIN_ATTEMPT_MS = 1_000;
const RETRY_MS = 2_000;

export interface ApiServerWait {
  timeoutS?: number;
  /** Pause between attempts. */
  retryMs?: number;
}

export interface ApiServerReadiness {
  server: string;
  /** Seconds until it answered ready. */
  waitedS: number;
}

/** One GET /readyz: undefined when ready, else what was seen (a status or the connection's error). */
async function readyz(kc: KubeConfig, server: string, timeoutMs: number): Promise<string | undefined> {
  const options: RequestOptions = { method: "GET", timeout: timeoutMs };
  // The cluster's CA (and nothing else) and the admin certificate, as the kubeconfig gives them.
  await kc.applyToHTTPSOptions(options);
  const url = new URL("/readyz", server);
  return new Promise((resolve) => {
    const done = (seen: string | undefined) => {
      // Each attempt has its own agent: close its sockets.
      (options.agent as Agent | undefined)?.destroy();
      resolve(seen);
    };
    const req = request(url, options, (res) => {
      res.resume();
      done(res.statusCode === 200 ? undefined : `HTTP ${res.statusCode}`);
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    req.end();
  });
}

/** Resolves once the kubeconfig's API server is ready; rejects after `timeoutS` naming it. */
export async function waitForApiServer(
  kubeconfig: string,
  o: ApiServerWait = {},
): Promise<ApiServerReadiness> {
  const timeoutS = o.timeoutS ?? API_SERVER_WAIT_S;
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfig);
  const cluster = kc.getCurrentCluster();
  const server = cluster?.server;
  if (!server) throw new Error("the kubeconfig names no API server for its current context");
  // Pinned to the cluster's CA: without one, any certificate the system trusts would pass.
  if (!cluster.caData && !cluster.caFile)
    throw new Error(`the kubeconfig for ${server} names no certificate authority; give it the cluster's CA`);
  const started = Date.now();
  const deadline = started + timeoutS * 1000;
  for (;;) {
    const seen = await readyz(
      kc,
      server,
      Math.min(ATTEMPT_TIMEOUT_MS, Math.max(MIN_ATTEMPT_MS, deadline - Date.now())),
    );
    if (seen === undefined) return { server, waitedS: (Date.now() - started) / 1000 };
    const left = deadline - Date.now();
    if (left <= 0)
      throw new Error(
        `the API server at ${server} was not ready within ${timeoutS} s (${server}/readyz, last: ${seen}); ` +
          "check that the control plane machine booted (its console output shows the bootstrap script's log) " +
          "and that this machine's address is in environment.apiAccessCidrs",
      );
    await new Promise((resolve) => setTimeout(resolve, Math.min(o.retryMs ?? RETRY_MS, left)));
  }
}
