// The probe's reading of each answer, on loopback (the VIP is 127.0.0.2, the node 127.0.0.1). Whether
// the answer comes back through the node's route is the ECMP test's part (real namespaces).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { probeNodeRoute } from "./nodeRouteProbe.ts";

let server: Server;
let answer: (url: string) => { status: number; body: string } | "hang";
let asked: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    asked.push(`${req.socket.remoteAddress} ${req.url}`);
    const a = answer(req.url ?? "");
    if (a === "hang") return;
    res.writeHead(a.status, { "content-type": "application/json" });
    res.end(a.body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});
beforeEach(() => (asked = []));

const probe = (port = (server.address() as AddressInfo).port) =>
  probeNodeRoute({
    nodeIp: "127.0.0.1",
    port,
    podIp: "10.244.1.5",
    sourceVip: "127.0.0.2",
    connectTimeoutMs: 300,
    answerTimeoutMs: 300,
  });

describe("probeNodeRoute", () => {
  it("asks the node agent about this pod from the VIP, and reads a 200 as routed and Ready", async () => {
    answer = () => ({ status: 200, body: JSON.stringify({ routed: true, ready: true, synced: true }) });
    expect(await probe()).toMatchObject({ route: true, ready: true });
    expect(asked).toEqual(["127.0.0.2 /lb-pods/10.244.1.5"]);
  });

  it("reads the agent's 'not Ready' (the route still worked: its answer arrived)", async () => {
    answer = () => ({ status: 503, body: JSON.stringify({ routed: true, ready: false, synced: true }) });
    expect(await probe()).toMatchObject({ route: true, ready: false });
  });

  it("leaves readiness unknown while the agent has not synced, or answers garbage", async () => {
    answer = () => ({ status: 503, body: JSON.stringify({ routed: false, ready: false, synced: false }) });
    expect(await probe()).toMatchObject({ route: true, ready: undefined });
    answer = () => ({ status: 503, body: "<html>" });
    expect(await probe()).toMatchObject({ route: true, ready: undefined });
  });

  it("counts a refusal (no agent) and a hung agent as a working route with readiness unknown", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    expect(await probe(port)).toMatchObject({ route: true, ready: undefined });
    answer = () => "hang";
    const started = Date.now();
    expect(await probe()).toMatchObject({ route: true, ready: undefined });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("fails when the VIP is not an address of this pod", async () => {
    answer = () => ({ status: 200, body: "{}" });
    const r = await probeNodeRoute({
      nodeIp: "127.0.0.1",
      port: (server.address() as AddressInfo).port,
      podIp: "10.244.1.5",
      sourceVip: "192.0.2.77",
      connectTimeoutMs: 300,
      answerTimeoutMs: 300,
    });
    expect(r).toMatchObject({ route: false });
  });
});
