// Makes the test run's kube-apiserver (on the host's loopback) reachable from inside a lab namespace
// at https://127.0.0.1:<port>, while every listener stays on a loopback: the host side serves a unix
// socket that forwards to the API server (TcpProxy), and the lab's forwarder.ts inside the namespace forwards
// its loopback port to that socket (socket paths are shared across network namespaces). The API
// server's certificate covers 127.0.0.1, so clients keep checking it.
import { KubeConfig } from "@kubernetes/client-node";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TcpProxy } from "../tcpProxy.ts";
import { repoRoot } from "../repoRoot.ts";
import type { LabNamespace, LabProcess } from "@portable-lb/lab";

export class ApiBridge {
  /** The API server's URL inside the namespace. */
  readonly server: string;
  /** A kubeconfig for processes inside the namespace (KUBECONFIG): the given credentials, bridged URL. */
  readonly kubeconfigFile: string;
  /** The host side: `cut()` takes the API server away from the namespace, `up()` brings it back. */
  readonly host: TcpProxy;
  readonly #dir: string;
  readonly #inside: LabProcess;

  private constructor(dir: string, host: TcpProxy, inside: LabProcess, server: string, kc: KubeConfig) {
    this.#dir = dir;
    this.host = host;
    this.#inside = inside;
    this.server = server;
    this.kubeconfigFile = join(dir, "kubeconfig");
    writeFileSync(this.kubeconfigFile, kc.exportConfig(), { mode: 0o600 });
  }

  /** Bridges the API server of the kubeconfig at `kubeconfigPath` into `ns`, on its loopback `port`. */
  static async open(ns: LabNamespace, kubeconfigPath: string, port = 6443): Promise<ApiBridge> {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath);
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error(`api bridge: ${kubeconfigPath} has no current cluster`);
    const target = new URL(cluster.server);
    // Short: a unix socket path has at most 107 characters.
    const dir = mkdtempSync(join(tmpdir(), "plb-api-"));
    const socketPath = join(dir, "api.sock");
    const host = new TcpProxy({ host: target.hostname, port: Number(target.port || 443) }, socketPath);
    try {
      await host.up();
      const script = join(repoRoot(), "packages/lab/src/forwarder.ts");
      const listen = `tcp:127.0.0.1:${port}`;
      const inside = await ns.spawn(
        `api-bridge-${port}`,
        process.execPath,
        [
          "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
          script,
          ...["--listen", listen, "--connect", `unix:${socketPath}`],
        ],
        { marker: `${script} --listen ${listen}`, waitForPort: port },
      );
      const server = `https://127.0.0.1:${port}`;
      kc.clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server } : c));
      return new ApiBridge(dir, host, inside, server, kc);
    } catch (err) {
      await host.cut();
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Stops both forwarders and removes the socket and kubeconfig. */
  async close(): Promise<void> {
    await this.#inside.stop();
    await this.host.cut();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
