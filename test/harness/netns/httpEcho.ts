// A tiny HTTP backend for network-namespace labs, like the paper's backends that answer with their
// own IP: every request gets a one-line JSON body naming the address the connection was accepted
// on (which is the VIP when the backend owns the VIP itself), the backend's name and the client's
// address (to see whether a load balancer rewrote the source), plus the same in X-Backend headers
// for curl's write-out. Keep-alive works; SIGTERM/SIGINT stop it at once.
//   node test/harness/netns/httpEcho.ts --port 8080 [--host 0.0.0.0] [--name b1]
// Runs under Node's type stripping directly: erasable syntax only, no relative imports.
import { createServer } from "node:http";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8080" },
    host: { type: "string", default: "0.0.0.0" },
    name: { type: "string", default: "" },
  },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`httpEcho: --port must be 1-65535 (got "${values.port}")`);
  process.exit(2);
}

/** IPv4 peers of a dual-stack socket appear as "::ffff:10.0.0.1": report them as plain IPv4. */
function plain(address: string | undefined): string {
  return (address ?? "").replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, "$1");
}

const server = createServer((req, res) => {
  const backend = plain(req.socket.localAddress);
  const name = values.name || backend;
  const body =
    JSON.stringify({
      backend,
      name,
      port: req.socket.localPort,
      client: plain(req.socket.remoteAddress),
      clientPort: req.socket.remotePort,
      method: req.method,
      url: req.url,
    }) + "\n";
  req.resume(); // any request body is read and dropped, so keep-alive connections stay usable
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "x-backend": backend,
    "x-backend-name": name,
    // Behind a load balancer that SNATs toward backends: which LB the request came through.
    "x-client": plain(req.socket.remoteAddress),
  });
  res.end(body);
});
server.keepAliveTimeout = 30_000;
server.on("error", (err) => {
  console.error(`httpEcho: ${err.message}`);
  process.exit(1);
});
server.listen(port, values.host, () => {
  console.log(`httpEcho ${values.name || "(unnamed)"} listening on ${values.host}:${port}`);
});

function stop(): void {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  // Bounded even if a connection refuses to close.
  setTimeout(() => process.exit(0), 2_000).unref();
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
