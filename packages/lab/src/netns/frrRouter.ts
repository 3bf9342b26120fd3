// An upstream router for network-namespace labs: FRR's zebra, bfdd and bgpd running in a namespace
// of their own, configured with a frr.conf (portable-lb's rendered snippet plus whatever the test
// adds), and its kernel FIB read back as the ECMP next hops of a prefix.
//
// The daemons start empty and get the whole file through `vtysh -f`, as `frr-reload`/`vtysh -b`
// do on a router: each daemon's own `-f` parser stops at the first block of another daemon.
// They run as the `frr` user (FRR refuses a vty group it is not in), so their folder is a fresh
// one under /tmp that user can write, removed by `stop`.
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitUntil } from "../processes.ts";
import { NetnsError, type LabNamespace, type LabProcess } from "./netnsLab.ts";

const FRR_BIN = "/usr/lib/frr";
/** Debian's frr-pythontools. */
const FRR_RELOAD = join(FRR_BIN, "frr-reload.py");
const DAEMONS = ["zebra", "bfdd", "bgpd"] as const;
type Daemon = (typeof DAEMONS)[number];

export interface NextHop {
  gateway: string;
  weight: number;
}

export class FrrRouter {
  readonly ns: LabNamespace;
  readonly dir: string;
  readonly #procs = new Map<Daemon, LabProcess>();

  private constructor(ns: LabNamespace, dir: string) {
    this.ns = ns;
    this.dir = dir;
  }

  /**
   * Starts zebra, bfdd and bgpd in `ns` and applies `config` (frr.conf text); their folder is `dir`
   * (made afresh) or a new one under /tmp.
   */
  static async start(ns: LabNamespace, config: string, dir?: string): Promise<FrrRouter> {
    if (dir) {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
    } else dir = mkdtempSync(join(tmpdir(), `plb-frr-${ns.name}-`));
    const uid = Number(execFileSync("id", ["-u", "frr"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "frr"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
    writeFileSync(join(dir, "frr.conf"), config, { mode: 0o644 });
    writeFileSync(join(dir, "empty.conf"), "", { mode: 0o644 });
    const router = new FrrRouter(ns, dir);
    for (const d of DAEMONS) await router.startDaemon(d);
    await router.vtyshFile(join(dir, "frr.conf"));
    return router;
  }

  /** Starts one daemon (again), waiting until its vty socket answers. */
  async startDaemon(daemon: Daemon, extraArgs: string[] = []): Promise<void> {
    const args = [
      ...["-u", "frr", "-g", "frr", "--vty_socket", this.dir, "-P", "0", "--log", "stdout"],
      ...["-i", join(this.dir, `${daemon}.pid`), "-z", join(this.dir, "zserv.api")],
      ...["-f", join(this.dir, "empty.conf")],
      ...(daemon === "bfdd" ? ["--bfdctl", join(this.dir, "bfdd.sock")] : []),
      ...extraArgs,
    ];
    const socket = join(this.dir, `${daemon}.vty`);
    rmSync(socket, { force: true });
    const proc = await this.ns.spawn(daemon, join(FRR_BIN, daemon), args, {
      marker: join(this.dir, `${daemon}.pid`),
    });
    this.#procs.set(daemon, proc);
    const up = await waitUntil(() => !proc.running() || existsSync(socket), 15_000, 50);
    if (!up || !proc.running())
      throw new NetnsError(`${this.ns.netns}: FRR ${daemon} did not start:\n${proc.lastLines()}`);
  }

  process(daemon: Daemon): LabProcess {
    const p = this.#procs.get(daemon);
    if (!p) throw new NetnsError(`FRR ${daemon} was never started`);
    return p;
  }

  /** Runs vtysh commands (each a `-c`), returning the output. */
  vtysh(...commands: string[]): Promise<string> {
    return this.ns.run("vtysh", ["--vty_socket", this.dir, ...commands.flatMap((c) => ["-c", c])]);
  }

  /** Applies a configuration file through vtysh (each block reaches the daemon it belongs to). */
  vtyshFile(file: string): Promise<string> {
    return this.ns.run("vtysh", ["--vty_socket", this.dir, "-f", file]);
  }

  /**
   * Brings the running daemons (whose folder is `dir`) to the configuration in `file` by the
   * difference alone (FRR's frr-reload.py, as a router's `systemctl reload frr`): sessions the
   * change does not touch stay up.
   */
  static async reload(ns: LabNamespace, dir: string, file: string): Promise<void> {
    const r = await ns.exec("python3", [
      ...[FRR_RELOAD, "--reload", "--stdout", "--log-level", "error"],
      ...["--vty_socket", dir, "--rundir", dir, "--confdir", dir, "--bindir", "/usr/bin", file],
    ]);
    if (r.code !== 0)
      throw new NetnsError(`${ns.netns}: frr-reload.py ${file} failed (${r.code}):\n${r.stdout}${r.stderr}`);
  }

  /** The kernel's next hops for exactly `prefix` (what forwarding uses), sorted; [] without a route. */
  async nextHops(prefix: string): Promise<NextHop[]> {
    return parseNextHops(await this.ns.ip("-j", "route", "show", "exact", prefix));
  }

  async stop(): Promise<void> {
    for (const d of [...DAEMONS].reverse()) await this.#procs.get(d)?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface RouteJson {
  gateway?: string;
  nexthops?: { gateway?: string; weight?: number }[];
}

/** `ip -j route show exact P` → next hops (a single-path route is one hop of weight 1). */
export function parseNextHops(json: string): NextHop[] {
  const routes = JSON.parse(json || "[]") as RouteJson[];
  return routes
    .flatMap((r) =>
      r.nexthops
        ? r.nexthops.map((h) => ({ gateway: h.gateway ?? "", weight: h.weight ?? 1 }))
        : r.gateway
          ? [{ gateway: r.gateway, weight: 1 }]
          : [],
    )
    .sort((a, b) => (a.gateway < b.gateway ? -1 : a.gateway > b.gateway ? 1 : 0));
}
