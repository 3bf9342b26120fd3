// The LB pod's check that its node routes a VIP pool to it, through the data path itself: an HTTP
// request to the node agent on the node's address, sent from one of the pool's VIPs (local in this
// pod). The node's answer is addressed to that VIP, so only the node's route for the pool brings it
// back here; without the route it leaves through the node's default gateway and the check times
// out. A refusal (no agent listening) proves the route just as well. The node agent's answer also
// relays this pod's Ready condition, which only the API server knows (see nodeAgent/desiredRoutes.ts).
import { request } from "node:http";
import { LB_HTTP_PATHS } from "@portable-lb/core/config";
import { z } from "zod";

export interface NodeRouteProbeOptions {
  /** The node's address (HOST_IP) and the node agent's port. */
  nodeIp: string;
  port: number;
  /** This pod's address, which the node agent is asked about. */
  podIp: string;
  /** A VIP of the pool, local in this pod: the source address the answer must come back to. */
  sourceVip: string;
  /** No connection by then: the answer did not come back, so the node does not route the pool here. */
  connectTimeoutMs: number;
  /** Connected, but no HTTP answer by then: the route works, the agent is hung or slow. */
  answerTimeoutMs: number;
}

export type NodeRouteProbeResult =
  | {
      route: true;
      /** The pod's readiness as the node agent sees it; undefined when the agent did not say. */
      ready: boolean | undefined;
      detail: string;
    }
  | { route: false; detail: string };

const answerSchema = z.object({ ready: z.boolean(), synced: z.boolean() }).loose();

/** Reads the node agent's body: its word on readiness, once it has seen the LB pods at all. */
function readinessFrom(body: string): boolean | undefined {
  try {
    const parsed = answerSchema.safeParse(JSON.parse(body));
    return parsed.success && parsed.data.synced ? parsed.data.ready : undefined;
  } catch {
    return undefined;
  }
}

export function probeNodeRoute(o: NodeRouteProbeOptions): Promise<NodeRouteProbeResult> {
  const target = `${o.nodeIp}:${o.port}`;
  return new Promise((resolve) => {
    let connected = false;
    let done = false;
    const finish = (result: NodeRouteProbeResult) => {
      if (done) return;
      done = true;
      clearTimeout(connectTimer);
      clearTimeout(answerTimer);
      req.destroy();
      resolve(result);
    };
    // A timer that fires after the event loop stalled must not beat the I/O waiting behind it:
    // setImmediate runs after the poll phase, where a pending connect or answer is taken first.
    const later = (f: () => void) => () => setImmediate(f);
    const req = request(
      {
        host: o.nodeIp,
        port: o.port,
        path: `${LB_HTTP_PATHS.lbPod}${o.podIp}`,
        localAddress: o.sourceVip,
        agent: false,
        headers: { connection: "close" },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () =>
          finish({
            route: true,
            ready: res.statusCode === 200 ? true : readinessFrom(body),
            detail: `node agent at ${target} answered ${res.statusCode}: ${body.trim()}`,
          }),
        );
        res.on("error", () => undefined);
      },
    );
    req.on("socket", (socket) => socket.once("connect", () => (connected = true)));
    req.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ECONNREFUSED")
        finish({
          route: true,
          ready: undefined,
          detail: `no node agent listens on ${target} (the refusal came back to ${o.sourceVip}, so the route works)`,
        });
      else if (connected)
        finish({ route: true, ready: undefined, detail: `node agent at ${target} failed: ${err.message}` });
      else finish({ route: false, detail: `${err.code ?? err.message} from ${o.sourceVip} to ${target}` });
    });
    const connectTimer = setTimeout(
      later(() => {
        if (!connected)
          finish({
            route: false,
            detail: `no answer from ${target} to ${o.sourceVip} within ${o.connectTimeoutMs} ms: the node does not route the pool to this pod`,
          });
      }),
      o.connectTimeoutMs,
    );
    const answerTimer = setTimeout(
      later(() =>
        finish(
          connected
            ? { route: true, ready: undefined, detail: `node agent at ${target} did not answer in time` }
            : { route: false, detail: `no answer from ${target} to ${o.sourceVip}` },
        ),
      ),
      o.connectTimeoutMs + o.answerTimeoutMs,
    );
    req.end();
  });
}
