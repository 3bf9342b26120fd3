// Steady keep-alive load for the connection-reset benchmark, run inside the client namespace:
// `node keepAliveClient.ts --url U --connections 60 --interval-ms 50 --seconds S [--fresh]`. Each of
// the connections is its own agent with one socket that sends a request every interval (0: back to
// back, for throughput); a request that fails ends that connection (the agent opens a new one).
// With --fresh every request opens a connection of its own (new source port), so an ECMP change
// can cost at most the requests in flight (the fault tests), not every moved keep-alive connection.
// With --spread random each request goes to one of the --url at random instead (a new connection
// per request, as the demo's server closes them, lands on a pod picked afresh: how a hash-based
// balancer spreads connections, so a pod's share of the open ones varies from moment to moment).
// With --trickle-ms every request is a connection of its own that sends its header a line at a time
// over that long before the server answers: a connection that lives that long whatever the server
// (the lab's demo server closes every connection after one answer), so an LB change finds every
// connection open and a moved one fails if the change breaks it (the kept-connection benchmarks).
// With --dns-server ADDRESS the urls' host names are resolved there for every new connection (no
// cache: a client honouring a short TTL), and each answer counted, so a DNS migration's test sees
// when clients moved to the new address.
// Prints one JSON line at the end (after --seconds, or at once on SIGTERM): its start (epoch ms),
// requests, requests answered in each second, connections opened, and every failure with its time
// (epoch ms), error code and connection (0 to --connections - 1); and, for backends that name
// themselves (an `x-backend-name` header, as test/harness/netns/httpEcho.ts sends), each time a
// connection's answers start coming from another backend (so a test can tell whose flows failed).
import { Agent, request } from "node:http";
import { Resolver } from "node:dns";
import { connect, isIP, type LookupFunction } from "node:net";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";

const { values } = parseArgs({
  options: {
    // Several: connection i uses the i-th modulo their number (clients spreading over pods themselves).
    url: { type: "string", multiple: true },
    spread: { type: "string", default: "fixed" },
    connections: { type: "string", default: "60" },
    "interval-ms": { type: "string", default: "50" },
    seconds: { type: "string", default: "60" },
    fresh: { type: "boolean", default: false },
    "trickle-ms": { type: "string", default: "0" },
    "dns-server": { type: "string" },
  },
});
if (!values.url?.length) throw new Error("--url is required");
const urls = values.url.map((u) => new URL(u));
if (values.spread !== "fixed" && values.spread !== "random")
  throw new Error(`--spread: fixed or random (got ${values.spread})`);
const pick = (own: URL) =>
  values.spread === "random" ? urls[Math.floor(Math.random() * urls.length)]! : own;
const intervalMs = Number(values["interval-ms"]);
const trickleMs = Number(values["trickle-ms"]);
/** Between two lines of a trickled header. */
const TRICKLE_LINE_MS = 250;
/** No byte from the server for this long fails a request. */
const IDLE_TIMEOUT_MS = 2_000;
const started = Date.now();
let deadline = started + Number(values.seconds) * 1000;
// The caller is done early (its events are over): end every connection after its current request.
process.once("SIGTERM", () => (deadline = Date.now()));
let requests = 0;
const perSecond = Array.from({ length: Math.ceil(Number(values.seconds)) }, () => 0);
let opened = 0;
const failures: { t: number; code: string; connection: number }[] = [];
const backends: { t: number; connection: number; backend: string }[] = [];
const lastBackend = new Map<number, string>();
const sockets = new WeakSet<object>();
/** How often each address was the answer, with --dns-server. */
const resolved: Record<string, number> = {};
const resolver = values["dns-server"] ? new Resolver({ timeout: 1_000, tries: 2 }) : undefined;
resolver?.setServers([values["dns-server"]!]);
const lookup: LookupFunction | undefined =
  resolver &&
  ((hostname, options, callback) => {
    if (isIP(hostname)) return callback(null, hostname, 4);
    resolver.resolve4(hostname, (err, addresses) => {
      const address = addresses?.[Math.floor(Math.random() * addresses.length)];
      if (err || !address)
        return callback(err ?? Object.assign(new Error("no address"), { code: "ENODATA" }), "", 4);
      resolved[address] = (resolved[address] ?? 0) + 1;
      if (options.all) callback(null, [{ address, family: 4 }]);
      else callback(null, address, 4);
    });
  });

function get(agent: Agent, url: URL, index: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port || 80,
        path: url.pathname,
        agent,
        timeout: 2_000,
        ...(lookup && { lookup }),
      },
      (res) => {
        const backend = res.headers["x-backend-name"];
        if (typeof backend === "string" && lastBackend.get(index) !== backend) {
          lastBackend.set(index, backend);
          backends.push({ t: Date.now(), connection: index, backend });
        }
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

/** One HTTP/1.0 request on a connection of its own, its header sent over `trickleMs`. */
function getTrickled(url: URL): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port || 80), ...(lookup && { lookup }) });
    opened++;
    let answer = "";
    let timer: NodeJS.Timeout | undefined;
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.setTimeout(IDLE_TIMEOUT_MS, () =>
      fail(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" })),
    );
    socket.on("error", fail);
    socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")));
    socket.on("end", () => {
      const status = /^HTTP\/1\.\d (\d{3})/.exec(answer)?.[1];
      if (status === "200") resolve();
      else
        fail(
          Object.assign(new Error(`answer: ${answer.slice(0, 40)}`), { code: `HTTP ${status ?? "none"}` }),
        );
    });
    socket.on("connect", () => {
      socket.write(`GET ${url.pathname} HTTP/1.0\r\nHost: ${url.host}\r\n`);
      const lines = Math.max(0, Math.floor(trickleMs / TRICKLE_LINE_MS));
      let sent = 0;
      const next = () => {
        if (sent++ < lines) {
          socket.write(`X-Trickle: ${sent}\r\n`);
          timer = setTimeout(next, TRICKLE_LINE_MS);
        } else socket.write("\r\n");
      };
      timer = setTimeout(next, TRICKLE_LINE_MS);
    });
  });
}

const newAgent = () => new Agent({ keepAlive: !values.fresh, maxSockets: 1 });

async function connection(index: number, url: URL): Promise<void> {
  let agent = newAgent();
  while (Date.now() < deadline) {
    const sent = Date.now();
    try {
      await (trickleMs > 0 ? getTrickled(pick(url)) : get(agent, pick(url), index));
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
  console.log(JSON.stringify({ started, requests, perSecond: ran, opened, failures, backends, resolved }));
});
