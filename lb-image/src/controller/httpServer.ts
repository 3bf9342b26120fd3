// /healthz (the process is alive and its data plane is not stuck failing), /readyz (rules applied and not draining), /prestop (the kubelet's
// preStop hook: stop taking new traffic, then answer), /metrics (Prometheus).
import { createServer, type Server } from "node:http";
import { LB_HTTP_PATHS } from "@portable-lb/core/config";
import type { Registry } from "prom-client";

export interface HealthState {
  /** False once applying or verifying the data plane has kept failing (the kubelet restarts us); default true. */
  live?(): boolean;
  ready(): boolean;
  /** Called once by preStop: withdraw announcements; resolves when that is done. */
  drain(): Promise<void>;
}

/** A component's own GET endpoint: its answer, or undefined when the path is not its. */
export type ExtraEndpoint = (path: string) => { status: number; body: string } | undefined;

/** Serves the health endpoints and /metrics; with `state` undefined, /metrics only. */
export function startHttpServer(
  port: number,
  state: HealthState | undefined,
  registry: Registry,
  host = "0.0.0.0",
  extra?: ExtraEndpoint,
): Promise<Server> {
  let draining = false;
  const server = createServer((req, res) => {
    const send = (code: number, body: string, type = "text/plain") => {
      res.writeHead(code, { "content-type": type });
      res.end(body);
    };
    if (!state && req.url !== LB_HTTP_PATHS.metrics) return send(404, "not found\n");
    switch (req.url) {
      case LB_HTTP_PATHS.healthz:
        return (state!.live?.() ?? true) ? send(200, "ok\n") : send(503, "data plane keeps failing\n");
      case LB_HTTP_PATHS.readyz:
        return state!.ready() && !draining
          ? send(200, "ok\n")
          : send(503, draining ? "draining\n" : "not ready\n");
      case LB_HTTP_PATHS.prestop:
        draining = true;
        return void state!.drain().then(
          () => send(200, "drained\n"),
          (err: unknown) => send(500, `${String(err)}\n`),
        );
      case LB_HTTP_PATHS.metrics:
        return void registry.metrics().then((m) => send(200, m, registry.contentType));
      default: {
        const answer = extra?.(req.url ?? "");
        return answer ? send(answer.status, answer.body, "application/json") : send(404, "not found\n");
      }
    }
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve(server));
  });
}
