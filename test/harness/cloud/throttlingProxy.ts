// A small fault proxy in front of moto: it answers the next `n` EC2 route writes (CreateRoute,
// ReplaceRoute, DeleteRoute) with AWS's throttling error (HTTP 503, RequestLimitExceeded), as EC2
// does under load, and passes everything else through, counting the calls by action (how the
// benchmark measures API calls at steady state). Listens on loopback at a free port.
import { createServer, request, type Server } from "node:http";

const THROTTLED = `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>throttling-proxy</RequestID></Response>`;

export class ThrottlingProxy {
  private server: Server | undefined;
  private remaining = 0;
  /** Writes answered with throttling so far. */
  throttled = 0;
  /** Calls seen, by EC2 action. */
  readonly calls = new Map<string, number>();
  endpoint = "";

  private readonly target: { host: string; port: number };

  constructor(target: { host: string; port: number }) {
    this.target = target;
  }

  /** Throttles the next `n` route writes. */
  throttle(n: number): void {
    this.remaining = n;
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const action = /(?:^|&)Action=(\w+)/.exec(body.toString())?.[1] ?? "unknown";
        this.calls.set(action, (this.calls.get(action) ?? 0) + 1);
        if (this.remaining > 0 && /^(CreateRoute|ReplaceRoute|DeleteRoute)$/.test(action)) {
          this.remaining--;
          this.throttled++;
          res.writeHead(503, { "content-type": "text/xml" }).end(THROTTLED);
          return;
        }
        const upstream = request(
          { ...this.target, method: req.method, path: req.url, headers: req.headers },
          (up) => {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
          },
        );
        upstream.on("error", () => res.writeHead(502).end());
        upstream.end(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.server = server;
    this.endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    server?.closeAllConnections();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
