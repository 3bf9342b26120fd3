// Runs the active checks: one timer per target (first run at a random point of its interval, so a
// thousand targets do not fire together), at most MAX_IN_FLIGHT probes at once, and a callback when
// a target's health flips, so the reconciler recomputes the weights.
import type { Logger } from "pino";
import { INITIAL_HEALTH, nextHealth, targetId, type HealthTarget, type TargetHealth } from "./healthState.ts";
import type { Probe } from "./probe.ts";

const MAX_IN_FLIGHT = 64;

interface Running {
  target: HealthTarget;
  health: TargetHealth;
  timer: NodeJS.Timeout | undefined;
}

export interface HealthCheckerDeps {
  probe: Probe;
  onChange: () => void;
  log: Logger;
  /** Called after every probe (metrics). */
  onResult?: (ok: boolean) => void;
}

export class HealthChecker {
  private readonly d: HealthCheckerDeps;
  private readonly targets = new Map<string, Running>();
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(deps: HealthCheckerDeps) {
    this.d = deps;
  }

  /** Checks exactly these targets from now on; a target kept keeps its health. */
  setTargets(targets: HealthTarget[]): void {
    const want = new Map(targets.map((t) => [targetId(t), t]));
    for (const [id, r] of this.targets) {
      if (want.has(id)) continue;
      clearTimeout(r.timer);
      this.targets.delete(id);
    }
    for (const [id, target] of want) {
      if (this.targets.has(id)) continue;
      const r: Running = { target, health: INITIAL_HEALTH, timer: undefined };
      this.targets.set(id, r);
      this.schedule(id, r, Math.random() * target.spec.intervalMs);
    }
  }

  isUnhealthy(target: HealthTarget): boolean {
    return this.targets.get(targetId(target))?.health.healthy === false;
  }

  unhealthyCount(): number {
    return [...this.targets.values()].filter((r) => !r.health.healthy).length;
  }

  stop(): void {
    this.setTargets([]);
  }

  private schedule(id: string, r: Running, delayMs: number): void {
    r.timer = setTimeout(() => void this.check(id, r), delayMs);
  }

  private async check(id: string, r: Running): Promise<void> {
    if (this.inFlight >= MAX_IN_FLIGHT) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.inFlight++;
    let ok: boolean;
    try {
      ok = await this.d.probe(r.target);
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
    if (this.targets.get(id) !== r) return; // removed meanwhile
    this.d.onResult?.(ok);
    const before = r.health.healthy;
    r.health = nextHealth(r.health, ok, r.target.spec);
    if (r.health.healthy !== before) {
      this.d.log.warn(
        { backend: `${r.target.ip}:${r.target.port}`, check: r.target.spec.kind, healthy: r.health.healthy },
        r.health.healthy ? "backend passes its health checks again" : "backend fails its health checks",
      );
      this.d.onChange();
    }
    this.schedule(id, r, r.target.spec.intervalMs);
  }
}
