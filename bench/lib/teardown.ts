// What a benchmark started, stopped in reverse order however it ends: normally, on an error, on
// SIGINT/SIGTERM (orderly stop, then exit), and at process exit (synchronous kills only; the
// harness's reapers clean whatever is still left on the next run).
export interface TeardownStep {
  name: string;
  stop: () => Promise<void>;
  /** Synchronous last resort for the exit handler. */
  killNow: () => void;
}

export class Teardown {
  #steps: TeardownStep[] = [];
  #running: Promise<void> | undefined;

  constructor() {
    const onSignal = (signal: NodeJS.Signals, code: number) => {
      console.error(`\n${signal}: stopping what the benchmark started...`);
      void this.run().finally(() => process.exit(code));
    };
    process.once("SIGINT", () => onSignal("SIGINT", 130));
    process.once("SIGTERM", () => onSignal("SIGTERM", 143));
    process.once("exit", () => {
      for (const step of this.#steps.reverse()) {
        try {
          step.killNow();
        } catch (err) {
          console.error(`teardown: ${step.name}: ${String(err)}`);
        }
      }
    });
  }

  add(step: TeardownStep): void {
    this.#steps.push(step);
  }

  /** Stops one step now (e.g. a controller between runs) and forgets it. */
  async stopOne(name: string): Promise<void> {
    const step = this.#steps.find((s) => s.name === name);
    if (!step) return;
    this.#steps = this.#steps.filter((s) => s !== step);
    await step.stop();
  }

  /** Stops every step, newest first; a failing step does not keep the others running. */
  run(): Promise<void> {
    this.#running ??= (async () => {
      while (this.#steps.length > 0) {
        const step = this.#steps.pop()!;
        try {
          await step.stop();
        } catch (err) {
          console.error(`teardown: ${step.name}: ${err instanceof Error ? err.message : String(err)}`);
          step.killNow();
        }
      }
    })();
    return this.#running;
  }
}
