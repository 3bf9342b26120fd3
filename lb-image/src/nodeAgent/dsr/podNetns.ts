// Finds a pod's network namespace on its node by the pod's IP: the container runtime keeps one
// file per pod sandbox in its netns directory (/var/run/netns for most CNI runtimes; containerd with
// `netns_mounts_under_state_dir` keeps them under its state directory). Each namespace is entered
// once to learn its addresses; the answers are cached by file, and a miss re-scans only the files
// not seen yet or seen without an address (a new pod, whose CNI may not have addressed it when first
// seen), dropping those that are gone.
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { podAddresses, type PodAddress } from "./podDsrState.ts";

/** Runs `ip ARGS` inside the namespace at a path (nsenter on a node; see DsrApplier). */
export type IpIn = (netnsPath: string, args: string[]) => Promise<string>;

export class PodNetns {
  /** netns file → the pod addresses in it ([] for a file that could not be entered). */
  private readonly known = new Map<string, PodAddress[]>();
  private readonly dir: string;
  private readonly ipIn: IpIn;

  constructor(dir: string, ipIn: IpIn) {
    this.dir = dir;
    this.ipIn = ipIn;
  }

  /** The netns file holding `ip`, scanning new files on a miss; undefined when none does. */
  async find(ip: string): Promise<string | undefined> {
    return this.lookup(ip) ?? ((await this.scan()) ? this.lookup(ip) : undefined);
  }

  /**
   * The node-side ifindex of the veth whose pod end holds `ip` (undefined: no such pod, or not on a
   * veth), scanning new files on a miss.
   */
  async peerIfindex(ip: string): Promise<number | undefined> {
    const path = await this.find(ip);
    return path === undefined ? undefined : this.known.get(path)?.find((a) => a.ip === ip)?.peerIfindex;
  }

  /** Every namespace file seen (after a scan), e.g. to adopt what a previous run left. */
  async all(): Promise<string[]> {
    await this.scan();
    return [...this.known.keys()];
  }

  /** Forgets a file whose addresses changed (an address given to a new pod), so it is entered again. */
  forget(path: string): void {
    this.known.delete(path);
  }

  private lookup(ip: string): string | undefined {
    for (const [path, addresses] of this.known) if (addresses.some((a) => a.ip === ip)) return path;
    return undefined;
  }

  /** Enters the files not seen yet or seen without addresses; true when anything changed. */
  private async scan(): Promise<boolean> {
    const files = new Set((await readdir(this.dir)).map((f) => join(this.dir, f)));
    let changed = false;
    for (const path of this.known.keys())
      if (!files.has(path)) {
        this.known.delete(path);
        changed = true;
      }
    for (const path of files) {
      if (this.known.get(path)?.length) continue;
      // A file that is not a namespace (or one being torn down) has no pod addresses.
      const addresses = await this.ipIn(path, ["-j", "-4", "addr", "show"]).then(podAddresses, () => []);
      changed ||= addresses.length > 0 || !this.known.has(path);
      this.known.set(path, addresses);
    }
    return changed;
  }
}
