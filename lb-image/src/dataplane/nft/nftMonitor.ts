// `nft monitor` in the pod's network namespace: tells at once when a process other than the
// engine's own nft runs commits a change to the engine's tables, so drift is read back and repaired
// without waiting for the next scheduled read. nft prints each committed change, then
// `# new generation N by process PID (COMM)`; a generation whose events touched our table and whose
// PID is not one of our writes is someone else's. Restarted with backoff when it dies (and the
// table is read back then: changes may have gone unseen meanwhile).
//
// nft 1.0.6's monitor keeps its own copy of the whole ruleset (measured: ~1 KB per lookup slot,
// 270 MB at 1,000 services × 10 endpoints), so the engine runs it only while its table is small
// (see NFT_MONITOR_MAX_SLOTS); larger tables rely on the scheduled cheap check and full reads.
import { CommandMonitor } from "../../common/commandMonitor.ts";
import { FIREWALL_TABLE } from "../firewall/firewallTable.ts";
import { NFT_TABLE } from "./nftState.ts";

/** Lookup slots (summed over services) up to which the monitor runs: ~35 MB of nft's memory. */
export const NFT_MONITOR_MAX_SLOTS = 32_768;

const GENERATION = /^# new generation \d+ by process (\d+)/;
/** The engine's table and the source-range firewall's (engine.ts keeps both). */
const OURS = [NFT_TABLE, FIREWALL_TABLE].map((t) => ` ip ${t} `);

export interface NftMonitorOptions {
  nft: [string, ...string[]];
  /** Whether `pid` is one of the engine's own nft writes. */
  isOwn: (pid: number) => boolean;
  /** Someone else changed the table (or the monitor restarted and may have missed it). */
  onForeignChange: () => void;
  onError?: (err: Error) => void;
  maxBackoffMs?: number;
}

export class NftMonitor {
  private readonly monitor: CommandMonitor;

  constructor(o: NftMonitorOptions) {
    let touched = false;
    this.monitor = new CommandMonitor({
      command: [...o.nft, "monitor"],
      onStart: () => {
        touched = false;
        o.onForeignChange();
      },
      onLine: (line) => {
        const generation = GENERATION.exec(line);
        if (!generation) {
          touched ||= OURS.some((t) => line.includes(t));
          return;
        }
        if (touched && !o.isOwn(Number(generation[1]))) o.onForeignChange();
        touched = false;
      },
      ...(o.onError && { onError: o.onError }),
      ...(o.maxBackoffMs !== undefined && { maxBackoffMs: o.maxBackoffMs }),
    });
  }

  /** Its command runs now: no foreign change goes unreported. */
  get live(): boolean {
    return this.monitor.live;
  }

  start(): void {
    this.monitor.start();
  }

  stop(): void {
    this.monitor.stop();
  }
}
