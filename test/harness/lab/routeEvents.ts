// The router's route changes for one VIP as its kernel announces them (`ip monitor route`), each
// stamped as it arrives. A poll of `ip route` lags by its period plus the time a loaded machine takes
// to run it, too coarse for a bound of about a second.
import { type ChildProcess, spawn } from "node:child_process";

export class RouteEvents {
  /** ms since the epoch of each route message about the VIP, in order. */
  readonly times: number[] = [];
  private readonly child: ChildProcess;

  private constructor(child: ChildProcess) {
    this.child = child;
  }

  /** Starts listening in `netns` (its own process group, so `stop` takes `ip netns exec` and ip). */
  static start(netns: string, vip: string): RouteEvents {
    const child = spawn("ip", ["netns", "exec", netns, "ip", "monitor", "route"], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    const events = new RouteEvents(child);
    // A multipath route is one message over several lines; its first names the destination.
    const first = new RegExp(`^(Deleted )?${vip.replaceAll(".", "\\.")}(/32)? `);
    let rest = "";
    child.stdout.setEncoding("utf8").on("data", (data: string) => {
      const now = Date.now();
      const lines = (rest + data).split("\n");
      rest = lines.pop()!;
      for (const line of lines) if (first.test(line)) events.times.push(now);
    });
    return events;
  }

  /** The first message after `t`, if any. */
  firstAfter(t: number): number | undefined {
    return this.times.find((e) => e > t);
  }

  stop(): void {
    try {
      process.kill(-this.child.pid!, "SIGKILL");
    } catch {
      // exited already
    }
  }
}
