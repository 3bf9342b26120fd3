// A containerd of a test's own, in a namespace of the test's: root, state and socket in a folder of
// the test's, only what importing and running images needs (no CRI, no /opt plugin, none of the
// snapshotters this machine lacks). Containers it runs get runc through its shim, as a kubelet's do;
// `--net-host` ones share the test's network namespace. Its mount namespace is a private copy of the
// test's (not `ip netns exec`'s, whose /sys has no cgroup mounts for runc) with a /run of its own,
// so the shims' sockets and runc's state, like the containers' root filesystem mounts, stay in it
// and go with it. `stop()` ends it by pid (the lab's process record).
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  execCommand,
  waitUntil,
  type ExecResult,
  type LabNamespace,
  type LabProcess,
} from "@portable-lb/lab";

const DISABLED_PLUGINS = [
  "grpc.v1.cri",
  "internal.v1.opt",
  "snapshotter.v1.aufs",
  "snapshotter.v1.btrfs",
  "snapshotter.v1.devmapper",
  "snapshotter.v1.zfs",
  "tracing.processor.v1.otlp",
  "internal.v1.tracing",
];

export class TestContainerd {
  readonly socket: string;
  /** containerd's namespace the test's images and containers live in. */
  readonly namespace: string;
  readonly #process: LabProcess;
  readonly #dir: string;

  private constructor(socket: string, namespace: string, process: LabProcess, dir: string) {
    this.socket = socket;
    this.namespace = namespace;
    this.#process = process;
    this.#dir = dir;
  }

  /** Starts containerd in `ns` with its files under `dir`; resolves once its socket is there. */
  static async start(ns: LabNamespace, dir: string, namespace: string): Promise<TestContainerd> {
    mkdirSync(dir, { recursive: true });
    const socket = join(dir, "containerd.sock");
    const s = JSON.stringify; // a JSON string is a valid TOML basic string
    writeFileSync(
      join(dir, "config.toml"),
      [
        "version = 2",
        `root = ${s(join(dir, "root"))}`,
        `state = ${s(join(dir, "state"))}`,
        `disabled_plugins = ${s(DISABLED_PLUGINS.map((p) => `io.containerd.${p}`))}`,
        "[grpc]",
        `  address = ${s(socket)}`,
        "[ttrpc]",
        `  address = ${s(`${socket}.ttrpc`)}`,
        "",
      ].join("\n"),
    );
    const process = await ns.spawn(
      "containerd",
      "nsenter",
      [
        `--mount=/proc/${globalThis.process.pid}/ns/mnt`,
        "--",
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        'mount -t tmpfs -o mode=755 tmpfs /run && exec "$@"',
        "sh",
        "containerd",
        "--config",
        join(dir, "config.toml"),
      ],
      { marker: "containerd" },
    );
    if (!(await waitUntil(() => existsSync(socket), 30_000, 100))) {
      await process.stop();
      throw new Error(`containerd in ${ns.netns} made no socket ${socket} within 30 s`);
    }
    return new TestContainerd(socket, namespace, process, dir);
  }

  /** `ctr ARGS...` against this containerd, in the test's namespace, bounded in time. */
  ctr(args: readonly string[], timeoutMs = 60_000): Promise<ExecResult> {
    return execCommand("ctr", ["--address", this.socket, "--namespace", this.namespace, ...args], {
      timeoutMs,
    });
  }

  /** `ctr run ARGS...`, its output through FIFOs in the test's folder (the shim sees no other /run). */
  run(args: readonly string[], timeoutMs = 60_000): Promise<ExecResult> {
    return this.ctr(["run", "--fifo-dir", join(this.#dir, "fifo"), ...args], timeoutMs);
  }

  stop(): Promise<void> {
    return this.#process.stop();
  }
}
