// Runs inside a lab namespace: listens on the namespace's own loopback and forwards each connection to
// a unix socket. Unix sockets are found by path, which network namespaces do not separate, so this is
// how a process in a namespace reaches a loopback-only server of the host (apiBridge.ts).
//   node test/harness/netns/unixForward.ts --port 6443 --socket /tmp/…/api.sock
// Runs under Node's type stripping directly: erasable syntax only, no relative imports.
import { createConnection, createServer } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { port: { type: "string" }, socket: { type: "string" } } });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 1 || port > 65535 || !values.socket) {
  console.error("usage: unixForward.ts --port 1-65535 --socket PATH");
  process.exit(2);
}
const socketPath = values.socket;

const server = createServer((inbound) => {
  const outbound = createConnection(socketPath);
  // Either side failing ends both: the client sees a reset, as with the real server gone.
  for (const [a, b] of [
    [inbound, outbound],
    [outbound, inbound],
  ] as const)
    a.on("error", () => b.destroy()).on("close", () => b.destroy());
  inbound.pipe(outbound).pipe(inbound);
});
server.on("error", (err) => {
  console.error(`unixForward: ${err.message}`);
  process.exit(1);
});
server.listen(port, "127.0.0.1", () => console.log(`unixForward 127.0.0.1:${port} -> ${socketPath}`));
