// The load client's spread over several urls, against two servers of its own on loopback.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { execCommand } from "@portable-lb/lab";
import { repoRoot } from "../../test/harness/repoRoot.ts";

/** A loopback server that counts its requests and closes each connection, as the demo's does. */
async function countingServer(): Promise<{ server: Server; url: string; count: () => number }> {
  let n = 0;
  const server = createServer((_req, res) => {
    n++;
    res.setHeader("Connection", "close");
    res.end("ok\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/`, count: () => n };
}

async function runClient(urls: string[], extra: string[]): Promise<{ requests: number }> {
  const out = await execCommand(
    process.execPath,
    [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      join(repoRoot(), "bench/lib/keepAliveClient.ts"),
      ...urls.flatMap((u) => ["--url", u]),
      ...["--connections", "1", "--interval-ms", "0", "--seconds", "1", ...extra],
    ],
    { timeoutMs: 30_000 },
  );
  if (out.code !== 0) throw new Error(`keepAliveClient failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split("\n").pop()!) as { requests: number };
}

describe("keepAliveClient --spread", () => {
  let a: Awaited<ReturnType<typeof countingServer>>;
  let b: Awaited<ReturnType<typeof countingServer>>;
  beforeEach(async () => {
    a = await countingServer();
    b = await countingServer();
  });
  afterEach(async () => {
    for (const s of [a, b]) await new Promise((resolve) => s.server.close(resolve));
  });

  it("keeps connection i on the i-th url by default", async () => {
    const r = await runClient([a.url, b.url], []);
    expect(r.requests).toBeGreaterThan(20);
    expect(a.count()).toBe(r.requests);
    expect(b.count()).toBe(0);
  });

  it("sends each request to a url at random with --spread random", async () => {
    const r = await runClient([a.url, b.url], ["--spread", "random"]);
    expect(r.requests).toBeGreaterThan(20);
    expect(a.count() + b.count()).toBe(r.requests);
    // Binomial(n, 1/2): each side well away from zero and from all of them.
    expect(Math.min(a.count(), b.count())).toBeGreaterThan(r.requests * 0.2);
  });

  it("refuses a spread it does not know", async () => {
    await expect(runClient([a.url], ["--spread", "round-robin"])).rejects.toThrow(
      /--spread: fixed or random \(got round-robin\)/,
    );
  });
});
