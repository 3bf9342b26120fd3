// The kubeconfig a `kubeconfig` environment names: parsed at preview, and its cluster probed, each
// against a real file and a real socket of this test's own.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { probeCluster, readKubeconfig } from "./kubeconfigFile.ts";

const dir = mkdtempSync(join(tmpdir(), "plb-kubeconfig-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfigFor(server: string, skipTls = false): string {
  const file = join(dir, `kc-${Math.random()}`);
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "${server}", insecure-skip-tls-verify: ${skipTls} } }]
users: [{ name: u, user: {} }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
  );
  return file;
}

async function listening<S extends Server | ReturnType<typeof createTcpServer>>(server: S): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

describe("readKubeconfig", () => {
  it.each([
    ["a host name", "myhost\n"],
    ["YAML without a context", "apiVersion: v1\nkind: Config\n"],
    ["broken YAML", "clusters: ["],
  ])("refuses %s, naming the file", (_what, text) => {
    const file = join(dir, "not-a-kubeconfig");
    writeFileSync(file, text);
    let error: unknown;
    try {
      readKubeconfig(file);
    } catch (err) {
      error = err;
    }
    expect(pulumi.RunError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^environment\\.kubeconfig: ${file} is not a kubeconfig \\(.+\\); point it at your cluster's kubeconfig, e\\.g\\. ~/\\.kube/config \\(got "${file}"\\)$`,
      ),
    );
  });

  it("returns the text and the current context's server", () => {
    const file = kubeconfigFor("https://10.0.0.2:6443");
    const kc = readKubeconfig(file);
    expect(kc.server).toBe("https://10.0.0.2:6443");
    expect(kc.contents).toContain("current-context: x");
  });
});

describe("probeCluster", () => {
  it("is content with any HTTP answer (here a 401): the server is there", async () => {
    const server = createHttpServer((_req, res) => res.writeHead(401).end());
    const port = await listening(server);
    try {
      expect(
        await probeCluster(readKubeconfig(kubeconfigFor(`http://127.0.0.1:${port}`, true))),
      ).toBeUndefined();
    } finally {
      server.close();
    }
  });

  it("names the server when nothing listens there", async () => {
    const server = createTcpServer();
    const port = await listening(server);
    await new Promise((resolve) => server.close(resolve));
    expect(await probeCluster(readKubeconfig(kubeconfigFor(`https://127.0.0.1:${port}`)))).toBe(
      `environment.kubeconfig: the cluster at https://127.0.0.1:${port} did not answer (ECONNREFUSED); check that it runs and that this machine can reach it`,
    );
  });

  it("gives up on a server that never answers, within its time bound", async () => {
    const sockets: Socket[] = [];
    const server = createTcpServer((socket) => sockets.push(socket));
    const port = await listening(server);
    try {
      const started = Date.now();
      const problem = await probeCluster(readKubeconfig(kubeconfigFor(`https://127.0.0.1:${port}`)), 500);
      expect(problem).toBe(
        `environment.kubeconfig: the cluster at https://127.0.0.1:${port} did not answer (no answer within 0.5 s); check that it runs and that this machine can reach it`,
      );
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
  });
});
