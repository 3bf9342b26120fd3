// The preview's SSH probe against loopback only: a port that accepts passes, a port nothing listens
// on is named with its node and host, and a port that never accepts is given up on within the bound.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type AddressInfo, type Server } from "node:net";
import { ConfigError } from "@portable-lb/core";
import { checkSshReachable, unreachableSshHosts } from "./sshReachability.ts";

const listening = (server: Server) =>
  new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
  );

/** A loopback port that nothing listens on: one the kernel gave out, and was closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  const port = await listening(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const node = (name: string, host: string) => ({
  name,
  host,
  address: "10.0.0.2",
  role: "worker" as const,
});

describe("SSH reachability at preview", () => {
  let open: Server;
  let openPort: number;
  beforeAll(async () => {
    open = createServer((socket) => socket.destroy());
    openPort = await listening(open);
  });
  afterAll(() => new Promise((resolve) => open.close(resolve)));

  it("passes when every host accepts on the SSH port", async () => {
    const env = {
      nodes: [node("cp", "127.0.0.1"), node("lb-1", "localhost")],
      ssh: { user: "root", port: openPort },
    };
    expect(await unreachableSshHosts(env)).toEqual([]);
    await expect(checkSshReachable(env)).resolves.toBeUndefined();
  });

  it("names each node whose SSH port nothing listens on, with its host and port", async () => {
    const port = await closedPort();
    const env = { nodes: [node("cp", "127.0.0.1"), node("lb-1", "127.0.0.2")], ssh: { user: "root", port } };
    const started = Date.now();
    const err = await checkSshReachable(env).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual(
      [
        ["0", "cp", "127.0.0.1"],
        ["1", "lb-1", "127.0.0.2"],
      ].map(
        ([i, name, host]) =>
          `environment.nodes[${i}].host: node ${name}: SSH at ${host}:${port} did not answer (ECONNREFUSED); check that the machine is up, that sshd listens on environment.ssh.port and that this machine can reach it (got "${host}")`,
      ),
    );
    // Refused at once: no waiting for the bound.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  describe("a host that never accepts", () => {
    // A listener whose accept queue is full and which never accepts: further SYNs are dropped, as a
    // firewall that drops would (python: node's servers always accept).
    let stuck: ChildProcess;
    let stuckPort: number;
    beforeAll(async () => {
      stuck = spawn("python3", [
        "-c",
        [
          "import socket,sys,time",
          "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(0)",
          // Connect until one is not accepted within 0.3 s: the queue is then full.
          "fill=[]",
          "for _ in range(8):",
          "  c=socket.socket(); c.settimeout(0.3)",
          "  try: c.connect(s.getsockname()); fill.append(c)",
          "  except socket.timeout: break",
          "else: sys.exit('the accept queue never filled')",
          "print(s.getsockname()[1], flush=True); time.sleep(60)",
        ].join("\n"),
      ]);
      stuckPort = await new Promise<number>((resolve, reject) => {
        stuck.stdout!.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
        stuck.once("exit", (code) => reject(new Error(`the stuck listener exited (${code})`)));
      });
    });
    afterAll(() => stuck.kill("SIGKILL"));

    it("is given up on within the bound, and named", async () => {
      const env = { nodes: [node("cp", "127.0.0.1")], ssh: { user: "root", port: stuckPort } };
      const started = Date.now();
      const problems = await unreachableSshHosts(env, 700);
      const took = Date.now() - started;
      expect(problems).toEqual([
        `environment.nodes[0].host: node cp: SSH at 127.0.0.1:${stuckPort} did not answer (no answer within 0.7 s); check that the machine is up, that sshd listens on environment.ssh.port and that this machine can reach it (got "127.0.0.1")`,
      ]);
      expect(took).toBeGreaterThanOrEqual(650);
      expect(took).toBeLessThan(2_000);
    });
  });
});
