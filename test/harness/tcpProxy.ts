// A loopback TCP proxy the test can cut and restore: how a test takes the API server away from one
// client (the controller) without stopping the control plane other tests share. It can listen on a
// unix socket instead, which processes in other network namespaces reach by path (netns/apiBridge.ts),
// and forward to one (a server inside a namespace, reached through a forwarder there).
import { createConnection, createServer, type Server, type Socket } from "node:net";

/** A TCP address, or a unix socket's path. */
export type ProxyTarget = { host: string; port: number } | { path: string };

export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly target: ProxyTarget;
  private readonly socketPath: string | undefined;
  port = 0;
  /** Connections accepted so far: a stopped client must stop making them. */
  accepted = 0;

  /** Listens on 127.0.0.1 (a free port, kept across cut/up), or on the unix socket `socketPath`. */
  constructor(target: ProxyTarget, socketPath?: string) {
    this.target = target;
    this.socketPath = socketPath;
  }

  /** Starts listening (at the same place again after cut()); resolves to the port (0 for a socket). */
  async up(): Promise<number> {
    const server = createServer((inbound) => {
      this.accepted++;
      const outbound = createConnection(this.target);
      for (const s of [inbound, outbound]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      inbound.pipe(outbound).pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      if (this.socketPath !== undefined) server.listen(this.socketPath, resolve);
      else server.listen(this.port, "127.0.0.1", resolve);
    });
    if (this.socketPath === undefined) this.port = (server.address() as { port: number }).port;
    this.server = server;
    return this.port;
  }

  /** Refuses new connections and resets every open one, as a lost API server would. */
  async cut(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    // Closing a unix-socket server also removes its socket file.
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
