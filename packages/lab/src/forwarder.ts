// A byte-for-byte TCP/unix-socket forwarder, run as its own process:
//   node forwarder.ts --listen tcp:127.0.0.1:6443 --connect unix:/run/…/api.sock
//   node forwarder.ts --listen unix:/run/…/api.sock --connect tcp:192.168.100.2:6443
// Unix sockets are found by path, which network namespaces do not separate, so a pair of these
// joins two namespaces while every TCP listener stays where it belongs: the lab reaches its control
// plane's namespace from this machine's loopback, and tests reach the host's API server from inside
// a namespace (test/harness/netns/apiBridge.ts).
// Runs under Node's type stripping directly: erasable syntax only, no relative imports.
import { createConnection, createServer, type NetConnectOpts } from "node:net";
import { rmSync } from "node:fs";
import { parseArgs } from "node:util";

type Endpoint = { path: string } | { host: string; port: number };

function endpoint(flag: string, spec: string | undefined): Endpoint {
  const unix = /^unix:(\/.+)$/.exec(spec ?? "");
  if (unix) return { path: unix[1]! };
  const tcp = /^tcp:([\d.]+):(\d{1,5})$/.exec(spec ?? "");
  if (tcp && Number(tcp[2]) >= 1 && Number(tcp[2]) <= 65535) return { host: tcp[1]!, port: Number(tcp[2]) };
  console.error(`forwarder: --${flag} must be tcp:ADDRESS:PORT or unix:/ABSOLUTE/PATH (got "${spec ?? ""}")`);
  process.exit(2);
}

const { values } = parseArgs({ options: { listen: { type: "string" }, connect: { type: "string" } } });
const listen = endpoint("listen", values.listen);
const target = endpoint("connect", values.connect) as NetConnectOpts;

const server = createServer((inbound) => {
  const outbound = createConnection(target);
  // Either side failing ends both: the client sees a reset, as with the real server gone.
  for (const [a, b] of [
    [inbound, outbound],
    [outbound, inbound],
  ] as const)
    a.on("error", () => b.destroy()).on("close", () => b.destroy());
  inbound.pipe(outbound).pipe(inbound);
});
server.on("error", (err) => {
  console.error(`forwarder: ${err.message}`);
  process.exit(1);
});
// A socket file left by a killed forwarder would make listen fail with EADDRINUSE.
if ("path" in listen) rmSync(listen.path, { force: true });
const ready = () => console.log(`forwarder ${values.listen} -> ${values.connect}`);
if ("path" in listen) server.listen(listen.path, ready);
else server.listen(listen.port, listen.host, ready);
for (const signal of ["SIGTERM", "SIGINT"] as const)
  process.on(signal, () => server.close(() => process.exit(0)));
