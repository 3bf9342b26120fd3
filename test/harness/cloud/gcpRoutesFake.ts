// A CONTRACT FAKE of the Compute Engine routes REST API (v1), not Google's service: no registry
// package serves a Compute API emulator, so this implements the part the cloud-routes mode uses, as
// Google documents it, and the tests drive it through the official @google-cloud/compute client
// (REST transport) pointed here. What it keeps to:
//   - global routes: POST/GET(list)/GET/DELETE /compute/v1/projects/P/global/routes[/NAME];
//   - inserts and deletes are long-running: they answer an Operation (RUNNING), which turns DONE
//     after `operationMs`; GET .../global/operations/OP and POST .../OP/wait read it by name or
//     numeric id (wait blocks until DONE, up to 2 s here); the route appears or goes when it is DONE;
//   - 409 ALREADY_EXISTS for a duplicate name, 404 NOT_FOUND for a missing route or operation,
//     400 for a route without name, destRange or next hop; error bodies in Google's JSON shape;
//   - `failNext(n, code)` answers the next n writes with that HTTP status (429, 503) for retry tests.
// It checks no authentication and keeps no networks: what it does not model it does not claim.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

export interface FakeRoute {
  name: string;
  destRange: string;
  priority: number;
  network: string;
  nextHopInstance?: string;
  description?: string;
  selfLink: string;
  creationTimestamp: string;
}

interface Operation {
  id: string;
  name: string;
  operationType: "insert" | "delete";
  targetLink: string;
  status: "RUNNING" | "DONE";
  done: Promise<void>;
}

const STATUS: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  404: "NOT_FOUND",
  409: "ALREADY_EXISTS",
  429: "RESOURCE_EXHAUSTED",
  503: "UNAVAILABLE",
};

export class GcpRoutesFake {
  readonly routes = new Map<string, FakeRoute>();
  private readonly operations = new Map<string, Operation>();
  private server: Server | undefined;
  private failures: { n: number; code: number } = { n: 0, code: 503 };
  /** Requests seen, by method and kind ("POST routes", "DELETE routes", "GET routes", "POST wait"...). */
  readonly calls = new Map<string, number>();
  port = 0;
  private readonly operationMs: number;
  /** Operation ids are uint64 in Google's schema (names are strings). */
  private nextId = 1_000_000;

  constructor(o: { operationMs?: number } = {}) {
    this.operationMs = o.operationMs ?? 50;
  }

  failNext(n: number, code: number): void {
    this.failures = { n, code };
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.server = server;
    this.port = (server.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    server?.closeAllConnections();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length
      ? (JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>)
      : {};
    const url = new URL(req.url ?? "/", "http://fake");
    const m = /^\/compute\/v1\/projects\/([^/]+)\/global\/(routes|operations)(?:\/([^/]+))?(\/wait)?$/.exec(
      url.pathname,
    );
    const send = (code: number, json: unknown): void => {
      res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(json));
    };
    const error = (code: number, message: string) =>
      send(code, { error: { code, message, status: STATUS[code] ?? "UNKNOWN", errors: [{ message }] } });
    if (!m) return error(404, `no such path ${url.pathname}`);
    const [, project, kind, name, wait] = m;
    const key = `${req.method} ${kind}${wait ? " wait" : ""}`;
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
    const isWrite = kind === "routes" && (req.method === "POST" || req.method === "DELETE");
    if (isWrite && this.failures.n > 0) {
      this.failures.n--;
      return error(this.failures.code, `injected failure ${this.failures.code}`);
    }
    const base = `https://compute.googleapis.com/compute/v1/projects/${project}/global`;
    if (kind === "operations") {
      // GCE takes an operation's name or its numeric id.
      const op =
        name && (this.operations.get(name) ?? [...this.operations.values()].find((o) => o.id === name));
      if (!op) return error(404, `The resource 'operations/${name}' was not found`);
      if (wait) await Promise.race([op.done, new Promise((r) => setTimeout(r, 2_000))]);
      return send(200, this.operationJson(op, base));
    }
    if (req.method === "GET" && !name)
      return send(200, { kind: "compute#routeList", items: [...this.routes.values()] });
    if (req.method === "GET") {
      const r = this.routes.get(name!);
      return r
        ? send(200, r)
        : error(404, `The resource 'projects/${project}/global/routes/${name}' was not found`);
    }
    if (req.method === "POST" && !name) {
      const r = body as Partial<FakeRoute>;
      if (!r.name || !r.destRange || !r.nextHopInstance)
        return error(400, "Invalid value: a route needs name, destRange and a next hop");
      if (
        this.routes.has(r.name) ||
        [...this.operations.values()].some(
          (o) =>
            o.targetLink.endsWith(`/${r.name}`) && o.status === "RUNNING" && o.operationType === "insert",
        )
      )
        return error(409, `The resource 'projects/${project}/global/routes/${r.name}' already exists`);
      const route: FakeRoute = {
        name: r.name,
        destRange: r.destRange,
        priority: r.priority ?? 1000,
        network: r.network ?? `${base}/networks/default`,
        nextHopInstance: r.nextHopInstance,
        ...(r.description !== undefined && { description: r.description }),
        selfLink: `${base}/routes/${r.name}`,
        creationTimestamp: new Date().toISOString(),
      };
      return send(
        200,
        this.operationJson(
          this.operate("insert", route.selfLink, () => this.routes.set(route.name, route)),
          base,
        ),
      );
    }
    if (req.method === "DELETE" && name) {
      if (!this.routes.has(name))
        return error(404, `The resource 'projects/${project}/global/routes/${name}' was not found`);
      return send(
        200,
        this.operationJson(
          this.operate("delete", `${base}/routes/${name}`, () => this.routes.delete(name)),
          base,
        ),
      );
    }
    return error(400, `unsupported: ${req.method} ${url.pathname}`);
  }

  private operate(type: Operation["operationType"], targetLink: string, apply: () => void): Operation {
    const op: Operation = {
      id: String(this.nextId++),
      name: `operation-${randomUUID()}`,
      operationType: type,
      targetLink,
      status: "RUNNING",
      done: Promise.resolve(),
    };
    op.done = new Promise<void>((resolve) =>
      setTimeout(() => {
        apply();
        op.status = "DONE";
        resolve();
      }, this.operationMs),
    );
    this.operations.set(op.name, op);
    return op;
  }

  private operationJson(op: Operation, base: string) {
    return {
      kind: "compute#operation",
      id: op.id,
      name: op.name,
      operationType: op.operationType,
      targetLink: op.targetLink,
      status: op.status,
      progress: op.status === "DONE" ? 100 : 0,
      selfLink: `${base}/operations/${op.name}`,
    };
  }
}
