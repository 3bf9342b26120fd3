// A monitor command in a network namespace of its own: what it reports of a lost event.
import { execFileSync } from "node:child_process";
import { CommandMonitor } from "./commandMonitor.ts";
import { waitFor } from "./testing/waitFor.ts";

const NS = `plb-cm-${process.pid}`;
beforeAll(() => execFileSync("ip", ["netns", "add", NS]));
afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

/** The pid of this process's child running `ip ... monitor`. */
function monitorPid(): number | undefined {
  try {
    return Number(
      execFileSync("pgrep", ["-P", String(process.pid), "-f", " monitor "], { encoding: "utf8" }).trim(),
    );
  } catch {
    return undefined; // none (pgrep exits 1)
  }
}

describe("CommandMonitor", () => {
  it("tells what the command says on stderr while it runs on: `ip monitor` losing events to a netlink overrun", async () => {
    const stderr: string[] = [];
    let lines = 0;
    const monitor = new CommandMonitor({
      command: ["ip", "-n", NS, "monitor", "route"],
      onStart: () => undefined,
      onLine: () => lines++,
      onStderr: (text) => stderr.push(text),
    });
    monitor.start();
    try {
      expect(await waitFor(() => monitorPid() !== undefined)).toBe(true);
      const pid = monitorPid()!;
      // Stopped, it reads nothing while thousands of route events fill its socket's buffer.
      process.kill(pid, "SIGSTOP");
      const batch = Array.from(
        { length: 4_000 },
        (_, i) => `route add local 10.5.${i >> 8}.${i & 255}/32 dev lo table local\n`,
      );
      execFileSync("ip", ["-n", NS, "-batch", "-"], { input: batch.join(""), timeout: 10_000 });
      process.kill(pid, "SIGCONT");
      expect(await waitFor(() => stderr.join("").includes("No buffer space available"))).toBe(true);
      // It ran on, and told the events it still had.
      expect(monitor.live).toBe(true);
      expect(monitorPid()).toBe(pid);
      expect(lines).toBeGreaterThan(0);
      expect(lines).toBeLessThan(4_000);
    } finally {
      monitor.stop();
    }
  });
});
