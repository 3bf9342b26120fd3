// A lab namespace as a node DSR traffic passes (backend pods, or an LB pod with none), for tests:
// strict as many distributions ship nodes (rp_filter 1, kube-proxy's drop of conntrack-INVALID
// packets in FORWARD), a container runtime's netns directory holding its pods' namespaces as bind
// mounts, and the node agent's DSR applier run as the agent runs it (only NET_ADMIN and SYS_ADMIN,
// in the node's namespace).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import { Registry } from "prom-client";
import { DsrApplier } from "../../../lb-image/src/nodeAgent/dsr/dsrApplier.ts";
import type { LabNamespace } from "@portable-lb/lab";

/** The table of the node's kube-proxy-like FORWARD drop (its one rule counts the drops). */
export const KUBE_PROXY_LIKE = "kubeproxy_like";

export class DsrBackendNode {
  readonly node: LabNamespace;
  /** The "runtime's" netns directory: one bind mount per pod namespace. */
  readonly netnsDir: string;
  readonly #mounts: string[] = [];

  private constructor(node: LabNamespace, netnsDir: string) {
    this.node = node;
    this.netnsDir = netnsDir;
  }

  /**
   * Makes `node` strict on `all` and `devices` (whatever the host has), and its pods' namespaces
   * findable, as containerd keeps them. `destroy` unmounts them.
   */
  static async create(node: LabNamespace, pods: LabNamespace[], devices: string[]): Promise<DsrBackendNode> {
    const backend = new DsrBackendNode(node, mkdtempSync("/run/plb-dsr-netns-"));
    try {
      await backend.makeStrict(devices);
      for (const pod of pods) backend.mountPod(pod);
    } catch (err) {
      backend.destroy();
      throw err;
    }
    return backend;
  }

  private async makeStrict(devices: string[]): Promise<void> {
    const node = this.node;
    for (const dev of ["all", ...devices]) await node.sysctl(`net.ipv4.conf.${dev}.rp_filter`, "1");
    await node.run("nft", ["-f", "-"], {
      input: [
        `table ip ${KUBE_PROXY_LIKE} {`,
        "  chain forward { type filter hook forward priority filter; policy accept;",
        "    ct state invalid counter drop",
        "  }",
        "}",
      ].join("\n"),
    });
  }

  private mountPod(pod: LabNamespace): void {
    const file = join(this.netnsDir, `cni-${pod.name}`);
    writeFileSync(file, "");
    execFileSync("mount", ["--bind", `/run/netns/${pod.netns}`, file]);
    this.#mounts.push(file);
  }

  /** The node agent's command prefix: its two capabilities, in the node's namespace. */
  agentPrefix(): string[] {
    return [
      "setpriv",
      "--bounding-set=-all,+net_admin,+sys_admin",
      "--",
      "ip",
      "netns",
      "exec",
      this.node.netns,
    ];
  }

  /**
   * A new applier, as a (re)started node agent makes it (`ipip`: for IPVS-engine LBs too;
   * `decapObject`: with the pods' tc BPF decapsulation).
   */
  applier(
    registry = new Registry(),
    o: { ipip?: boolean; decapObject?: string; log?: Logger } = {},
  ): DsrApplier {
    return new DsrApplier({
      commandPrefix: this.agentPrefix(),
      netnsDir: this.netnsDir,
      procSysNet: "/proc/sys/net",
      log: o.log ?? pino({ level: "warn" }),
      registry,
      ...(o.ipip !== undefined && { ipip: o.ipip }),
      ...(o.decapObject !== undefined && { decapObject: o.decapObject }),
    });
  }

  destroy(): void {
    for (const m of this.#mounts.splice(0)) execFileSync("umount", [m]);
    rmSync(this.netnsDir, { recursive: true, force: true });
  }
}
