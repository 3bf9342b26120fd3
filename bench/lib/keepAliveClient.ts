// Steady keep-alive load for the connection-reset benchmark, run inside the client namespace:
// `node keepAliveClient.ts --url U --connections 60 --interval-ms 50 --seconds S [--fresh]`. Each of
// the connections is its own agent with one socket that sends a request every interval (0: back to
// back, for throughput); a request that fails ends that connection (the agent opens a new one).
// With --fresh every request opens a connection of its own (new source port), so an ECMP change
// can cost at most the requests in flight (the fault tests), not every moved keep-alive connection.
// Prints one JSON line at the end (after --seconds, or at once on SIGTERM): its start (epoch ms),
// requests, requests answered in each second, connections opened, and every failure with its time
// (epoch ms), error code and connection (0 to --connections - 1).
import { Agent, request } from "node:http";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";

const { values } = parseArgs({
  options: {
    // Several: connection i uses the i-th modulo their number (clients spreading over pods themselves).
    url: { type: "string", multiple: true },
    connections: { type: "string", default: "60" },
    "interval-ms": { type: "string", default: "50" },
    seconds: { type: "string", default: "60" },
    fresh: { type: "boolean", default: false },
  },
});
if (!values.url?.length) throw new Error("--url is required");
const urls = values.url.map((u) => new URL(u));
const intervalMs = Number(values["interval-ms"]);
const started = Date.now();
let deadline = started + Number(values.seconds) * 1000;
// The caller is done early (its events are over): end every connection after its current request.
process.once("SIGTERM", () => (deadline = Date.now()));
let requests = 0;
const perSecond = Array.from({ length: Math.ceil(Number(values.seconds)) }, () => 0);
let opened = 0;
const failures: { t: number; code: string; connection: number }[] = [];
const sockets = new WeakSet<object>();

function get(agent: Agent, url: URL): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port || 80, path: url.pathname, agent, timeout: 2_000 },
      (res) => {
        res.resume();
        res.on("end", resolve);
        res.on("error", reject);
      },
    );
    req.on("socket", (socket) => {
      if (sockets.has(socket)) return;
      sockets.add(socket);
      opened++;
    });
    req.on("timeout", () => req.destroy(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" })));
    req.on("error", reject);
    req.end();
  });
}

const newAgent = () => new Agent({ keepAlive: !values.fresh, maxSockets: 1 });

async function connection(index: number, url: URL): Promise<void> {
  let agent = newAgent();
  while (Date.now() < deadline) {
    const sent = Date.now();
    try {
      await get(agent, url);
      requests++;
      const second = Math.floor((Date.now() - started) / 1000);
      if (second < perSecond.length) perSecond[second]!++;
    } catch (err) {
      failures.push({
        t: Date.now(),
        code: (err as { code?: string }).code ?? String(err),
        connection: index,
      });
      agent.destroy();
      agent = newAgent();
      // Back to back, a refused connection would otherwise be retried in a tight loop.
      if (intervalMs === 0) await sleep(10);
    }
    if (intervalMs > 0) await sleep(Math.max(0, intervalMs - (Date.now() - sent)));
  }
  agent.destroy();
}

void Promise.all(
  Array.from({ length: Number(values.connections) }, (_, i) => connection(i, urls[i % urls.length]!)),
).then(() => {
  const ran = perSecond.slice(0, Math.ceil((Date.now() - started) / 1000));
  console.log(JSON.stringify({ started, requests, perSecond: ran, opened, failures }));
});
