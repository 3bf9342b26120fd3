// The network-namespace lab harness: a client ↔ router ↔ two-backend lab carries ping and HTTP,
// multipath routes with L4 hashing spread flows, commands inside namespaces fail clearly and within
// their bounds, and every way a lab ends (destroy, a dead owner, an owner exiting) leaves no
// namespace, process or state file behind.
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { httpHistogram, startHttpEcho } from "../harness/netns/httpClient.ts";
import {
  commandLine,
  execCommand,
  type LabNamespace,
  NetnsLab,
  reapStaleLabs,
  waitUntil,
} from "@portable-lb/lab";

const run = promisify(execFile);

/** The namespaces on this machine that belong to lab `id`. */
async function namespacesOf(id: string): Promise<string[]> {
  const { stdout } = await run("ip", ["netns", "list"]);
  return stdout
    .split("\n")
    .map((line) => line.split(" ")[0]!)
    .filter((name) => name.startsWith(`${id}-`));
}

describe("a lab with a client, a router and two backends on a bridge", () => {
  const VIP = "10.99.0.10";
  let lab: NetnsLab;
  let client: LabNamespace;
  let router: LabNamespace;
  let backends: LabNamespace[];

  beforeAll(async () => {
    lab = await NetnsLab.create("netns-test");
    client = await lab.namespace("client");
    router = await lab.namespace("router", { forwarding: true });
    backends = [await lab.namespace("b1"), await lab.namespace("b2")];
    await lab.link(client, router, { a: "10.10.0.2/24", b: "10.10.0.1/24" });
    await client.defaultRoute("10.10.0.1");
    const nodeNet = await lab.bridge(router, "br0", "10.10.1.1/24");
    for (const [i, b] of backends.entries()) {
      await lab.attach(nodeNet, b, `10.10.1.${11 + i}/24`, "eth0");
      await b.defaultRoute("10.10.1.1");
      // Each backend owns the VIP too, so the router's multipath route can hand flows to either.
      await b.localRoute(`${VIP}/32`);
      await startHttpEcho(b, { port: 8080, name: b.name });
    }
  });
  afterAll(() => lab?.destroy());

  it("carries ping and HTTP from the client through the router, and each backend names its own address", async () => {
    await client.run("ping", ["-c", "1", "-W", "5", "10.10.1.12"]);
    for (const [i, b] of backends.entries()) {
      const body = await client.run("curl", [
        "-sS",
        "--noproxy",
        "*",
        "--max-time",
        "5",
        `http://10.10.1.${11 + i}:8080/hello`,
      ]);
      expect(JSON.parse(body)).toEqual({
        backend: `10.10.1.${11 + i}`,
        name: b.name,
        port: 8080,
        client: "10.10.0.2",
        clientPort: expect.any(Number),
        method: "GET",
        url: "/hello",
      });
    }
    const histogram = await httpHistogram(client, "http://10.10.1.11:8080/", { count: 5 });
    expect(histogram).toMatchObject({ counts: { "10.10.1.11": 5 }, answered: 5, failures: 0, errors: {} });
  });

  it("spreads 200 connections over both nexthops of a multipath route hashed on L4", async () => {
    await router.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
    await router.route(`${VIP}/32`, ["10.10.1.11", "10.10.1.12"]);
    expect(await router.ip("route", "show", `${VIP}/32`)).toMatch(
      /nexthop via 10\.10\.1\.11[^]*nexthop via 10\.10\.1\.12/,
    );

    const histogram = await httpHistogram(client, `http://${VIP}:8080/`, { count: 200, by: "name" });
    expect(histogram.failures).toBe(0);
    expect(Object.keys(histogram.counts).sort()).toEqual(["b1", "b2"]);
    expect(histogram.counts.b1).toBeGreaterThanOrEqual(40);
    expect(histogram.counts.b2).toBeGreaterThanOrEqual(40);
  });

  it("runs commands inside a namespace, failing with the namespace, command and stderr, within their time bound", async () => {
    expect((await router.sysctl("net.ipv4.ip_forward")).trim()).toBe("1");
    expect(await client.sysctl("net.ipv4.ip_forward")).toBe("0");
    expect(await client.exec("sh", ["-c", "echo out; echo err >&2; exit 3"])).toEqual({
      stdout: "out\n",
      stderr: "err\n",
      code: 3,
      timedOut: false,
    });
    await expect(client.run("sh", ["-c", "echo boom >&2; exit 3"])).rejects.toThrow(
      `${client.netns}: 'sh -c echo boom >&2; exit 3' failed (exit 3): boom`,
    );
    const started = Date.now();
    expect(await client.exec("sleep", ["30"], { timeoutMs: 300 })).toMatchObject({
      code: 124,
      timedOut: true,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    await expect(client.ip("route", "add", "10.77.0.0/16", "via", "192.0.2.1")).rejects.toThrow(
      `${client.netns}: 'ip -n ${client.netns} route add 10.77.0.0/16 via 192.0.2.1' failed (exit 2): Error: Nexthop has invalid gateway.`,
    );
  });

  it("refuses a process that exits before it listens, with its last log lines", async () => {
    await expect(
      client.spawn("broken", "sh", ["-c", "echo cannot bind; exit 1"], {
        waitForPort: 9999,
        readyTimeoutMs: 10_000,
      }),
    ).rejects.toThrow(
      new RegExp(
        `^${client.netns}: broken \\(sh\\) exited during start-up; last lines of .*client-broken\\.log:\\ncannot bind$`,
      ),
    );
  });
});

describe("execCommand", () => {
  it("on abort, sends SIGTERM to the command's process group, and a command that stops cleanly still answers", async () => {
    const stop = new AbortController();
    const began = Date.now();
    const run = execCommand("sh", ["-c", 'trap "echo stopped; exit 0" TERM; echo started; sleep 30 & wait'], {
      timeoutMs: 20_000,
      signal: stop.signal,
    });
    setTimeout(() => stop.abort(), 300);
    const result = await run;
    expect(result).toMatchObject({ code: 0, timedOut: false, stdout: "started\nstopped\n" });
    expect(Date.now() - began).toBeLessThan(10_000);
  });
});

describe("lab cleanup", () => {
  it("destroy() stops the lab's processes and deletes its namespaces and state, idempotently", async () => {
    const lab = await NetnsLab.create("destroy-test");
    const a = await lab.namespace("a");
    const b = await lab.namespace("b");
    await lab.link(a, b, { a: "10.20.0.1/30", b: "10.20.0.2/30" });
    const echo = await startHttpEcho(b, { port: 8081 });
    // A grandchild the lab did not start directly: found through its namespace.
    const shell = await a.spawn("shell", "sh", ["-c", "sleep 300 & wait"]);
    let grandchild = 0;
    const forked = await waitUntil(async () => {
      const { stdout } = await run("ip", ["netns", "pids", a.netns]);
      grandchild =
        stdout
          .split("\n")
          .map(Number)
          .find((pid) => pid && pid !== shell.pid) ?? 0;
      return commandLine(grandchild) === "sleep 300"; // once the forked shell has exec'd sleep
    }, 10_000);
    expect(forked).toBe(true);
    expect((await namespacesOf(lab.id)).sort()).toEqual([a.netns, b.netns].sort());
    expect(existsSync(lab.stateFile)).toBe(true);

    await Promise.all([lab.destroy(), lab.destroy()]);
    await lab.destroy();
    expect(await namespacesOf(lab.id)).toEqual([]);
    for (const pid of [echo.pid, shell.pid, grandchild]) expect(commandLine(pid)).toBeUndefined();
    expect(existsSync(lab.stateFile)).toBe(false);
    expect(existsSync(lab.dir)).toBe(false);
    await expect(lab.namespace("c")).rejects.toThrow(`netns lab ${lab.id} is destroyed`);
  });

  it("reapStaleLabs() removes a lab whose owner died (a run killed before its cleanup)", async () => {
    const owner = spawn("sleep", ["120"], { stdio: "ignore" });
    const lab = await NetnsLab.create("reap-test", { ownerPid: owner.pid! });
    try {
      const a = await lab.namespace("a");
      const sleeper = await a.spawn("sleeper", "sleep", ["300"]);
      expect(await reapStaleLabs()).not.toContainEqual(expect.stringContaining(lab.id));
      expect(await namespacesOf(lab.id)).toEqual([a.netns]);

      owner.kill("SIGKILL");
      await waitUntil(() => commandLine(owner.pid!) === undefined, 5_000, 20);
      const lines = await reapStaleLabs();
      expect(lines).toContain(
        `netns lab: removed stale lab ${lab.id} ('reap-test', owner pid ${owner.pid} gone): namespaces ${a.netns}; stopped pids ${sleeper.pid}`,
      );
      expect(await namespacesOf(lab.id)).toEqual([]);
      expect(commandLine(sleeper.pid)).toBeUndefined();
      expect(existsSync(lab.stateFile)).toBe(false);
    } finally {
      owner.kill("SIGKILL");
      await lab.destroy();
    }
  });

  it("removes the lab of an owner that exits without destroy()", async () => {
    const script = [
      `import { NetnsLab } from ${JSON.stringify(join(__dirname, "../../packages/lab/src/netns/netnsLab.ts"))};`,
      `const lab = await NetnsLab.create("exit-test");`,
      `const ns = await lab.namespace("a");`,
      `const p = await ns.spawn("sleeper", "sleep", ["300"]);`,
      `console.log(JSON.stringify({ id: lab.id, pid: p.pid, stateFile: lab.stateFile }));`,
      `process.exit(0);`,
    ].join("\n");
    const { stdout } = await run(
      process.execPath,
      ["--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", "--input-type=module", "-e", script],
      { timeout: 60_000 },
    );
    const left = JSON.parse(stdout) as { id: string; pid: number; stateFile: string };
    expect(await namespacesOf(left.id)).toEqual([]);
    expect(await waitUntil(() => commandLine(left.pid) === undefined, 5_000, 20)).toBe(true);
    expect(existsSync(left.stateFile)).toBe(false);
  });
});
