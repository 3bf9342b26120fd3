// The control-plane harness itself: the shared instance works end to end, and every way of failing
// gives one clear error and leaves no process or folder behind.
import { spawn, execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import {
  commandLine,
  instancesRoot,
  issueClientCert,
  makePki,
  reapStale,
  startControlPlane,
  stopControlPlane,
  waitUntil,
} from "@portable-lb/lab";
import { testKubeconfig } from "../harness/testEnv.ts";

const run = promisify(execFile);

/** Pids of processes whose command line mentions `dir` (what an instance in `dir` would leave). */
function processesUsing(dir: string): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .map(Number)
    .filter((pid) => pid !== process.pid && (commandLine(pid)?.includes(dir) ?? false));
}

// Each failure test gets its own instances root, so reaping there cannot touch the run's instance.
const scratchRoots: string[] = [];
function scratchDir(): string {
  const root = mkdtempSync(join(tmpdir(), "plb-cp-"));
  scratchRoots.push(root);
  return join(root, "cp");
}
afterAll(() => scratchRoots.forEach((root) => rmSync(root, { recursive: true, force: true })));

describe("the run's shared control plane", () => {
  const kc = new KubeConfig();
  kc.loadFromFile(testKubeconfig());
  const core = kc.makeApiClient(CoreV1Api);

  it("serves the API with RBAC, and the controller-manager allocates node pod CIDRs", async () => {
    const name = `harness-node-${process.pid}`;
    await core.createNode({ body: { metadata: { name } } });
    try {
      let podCIDR: string | undefined;
      const allocated = await waitUntil(async () => {
        podCIDR = (await core.readNode({ name })).spec?.podCIDR;
        return podCIDR !== undefined;
      }, 30_000);
      expect(allocated).toBe(true);
      expect(podCIDR).toMatch(/^10\.244\.\d+\.0\/24$/);
    } finally {
      await core.deleteNode({ name });
    }
  });

  it("is reachable with kubectl through the kubeconfig it hands out", async () => {
    const { stdout } = await run("kubectl", [
      "--kubeconfig",
      testKubeconfig(),
      "auth",
      "can-i",
      "create",
      "namespaces",
    ]);
    expect(stdout.trim()).toBe("yes");
  });
});

describe("the control plane's PKI", () => {
  it("signs client certificates issued at the same time (nodes join in parallel), each valid and distinct", async () => {
    const dir = scratchDir();
    mkdirSync(dir);
    const pki = await makePki(dir, ["127.0.0.1"], []);
    const names = Array.from({ length: 24 }, (_, i) => `node${i + 1}`);
    const certs = await Promise.all(
      names.map((n) =>
        issueClientCert(dir, { name: `node-${n}`, user: `system:node:${n}`, groups: ["system:nodes"] }),
      ),
    );
    const serials = new Set<string>();
    for (const [i, { cert }] of certs.entries()) {
      expect((await run("openssl", ["verify", "-CAfile", pki.caCert, cert])).stdout.trim()).toBe(
        `${cert}: OK`,
      );
      const { stdout } = await run("openssl", [
        "x509",
        "-in",
        cert,
        "-noout",
        "-serial",
        "-subject",
        "-nameopt",
        "RFC2253",
      ]);
      expect(stdout).toContain(`subject=O=system:nodes,CN=system:node:${names[i]}`);
      serials.add(/serial=(\w+)/.exec(stdout)![1]!);
    }
    expect(serials.size).toBe(names.length);
  });
});

describe("control plane failures", () => {
  it("names the component and its log when one fails to start, and leaves nothing behind", async () => {
    const dir = scratchDir();
    // A service CIDR with a /33 mask makes kube-apiserver exit while validating flags: a real start-up failure.
    const attempt = startControlPlane({ dir, serviceCidr: "10.96.0.0/33", readyTimeoutMs: 30_000 });
    await expect(attempt).rejects.toThrow(
      new RegExp(
        `^control plane: kube-apiserver exited during start-up; last lines of ${dir}/kube-apiserver\\.log:\\n` +
          `[^]*service-cluster-ip-range\\[0\\] is not a valid cidr[^]*\\(logs kept in ${dir}\\.failed-logs\\)$`,
      ),
    );
    expect(existsSync(dir)).toBe(false);
    expect(processesUsing(dir)).toEqual([]);
  });

  it("refuses a port that is already in use, naming the port, its purpose and the fix", async () => {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      await expect(startControlPlane({ dir: scratchDir(), apiserverPort: port })).rejects.toThrow(
        `port 127.0.0.1:${port} (kube-apiserver --secure-port) is already in use: stop what listens there (see 'ss -ltnp sport = :${port}') or pick another port`,
      );
    } finally {
      server.close();
    }
  });

  it("reaps an instance whose owner died (a test run killed before teardown)", async () => {
    const owner = spawn("sleep", ["120"], { stdio: "ignore" });
    const dir = scratchDir();
    const state = await startControlPlane({ dir, ownerPid: owner.pid! });
    try {
      expect(processesUsing(dir)).toHaveLength(4);
      owner.kill("SIGKILL");
      await waitUntil(() => commandLine(owner.pid!) === undefined, 5_000, 20);
      const lines = await reapStale(join(dir, ".."));
      expect(lines).toEqual([
        expect.stringMatching(
          new RegExp(
            `^control plane: removed a stale instance from an earlier run in ${dir} \\(stopped pids \\d+, \\d+, \\d+, \\d+\\)$`,
          ),
        ),
      ]);
      expect(processesUsing(dir)).toEqual([]);
      expect(existsSync(dir)).toBe(false);
    } finally {
      owner.kill("SIGKILL");
      await stopControlPlane(state);
    }
  });
});

describe("control-plane command line", () => {
  const cli = (...args: string[]) =>
    run(process.execPath, [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      join(__dirname, "../../packages/lab/src/controlPlane/cli.ts"),
      ...args,
    ]);

  it("brings an instance up idempotently, reports it, and takes it down", async () => {
    const name = `cli-${process.pid}`;
    try {
      const first = await cli("up", "--name", name);
      const kubeconfig = first.stdout.trim();
      expect(kubeconfig).toBe(join(instancesRoot(), name, "admin.kubeconfig"));
      expect(first.stderr).toMatch(
        new RegExp(`control plane '${name}' ready at https://127\\.0\\.0\\.1:\\d+`),
      );

      const again = await cli("up", "--name", name);
      expect(again.stdout.trim()).toBe(kubeconfig);
      expect(again.stderr).toMatch(/is already running/);

      const status = await cli("status", "--name", name);
      expect(status.stdout.match(/running/g)).toHaveLength(4);

      const { stdout } = await run("kubectl", ["--kubeconfig", kubeconfig, "get", "--raw", "/readyz"]);
      expect(stdout.trim()).toBe("ok");
    } finally {
      await cli("down", "--name", name);
    }
    expect(existsSync(join(instancesRoot(), name))).toBe(false);
    expect(processesUsing(join(instancesRoot(), name))).toEqual([]);
  });
});
