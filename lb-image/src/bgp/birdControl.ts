// BIRD's control socket, through its own clients: `birdc` for one command, `birdcl` for several
// in one connection (the session-state poll runs every ~200 ms, so one process per poll). Used by
// the controller (SpeakerControl, SessionMonitor) and by the speaker container's commands.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError, run } from "../dataplane/exec.ts";
import { exportedPerSession } from "./birdOutput.ts";

type Argv = [string, ...string[]];

export interface BirdClients {
  birdc?: Argv;
  birdcl?: Argv;
}

/** birdcl echoes each command it reads after its prompt; its answer follows, up to the next prompt. */
const PROMPT = /^bird> /m;

export class BirdControl {
  readonly socket: string;
  private readonly clients: BirdClients;

  constructor(socket: string, clients: BirdClients = {}) {
    this.socket = socket;
    this.clients = clients;
  }

  /** The socket exists: BIRD runs, or is starting, or died and left it (commands then fail). */
  get present(): boolean {
    return existsSync(this.socket);
  }

  /** One command (`birdc -s SOCKET ARGS…`); rejects with birdc's message. */
  run(args: string[], timeoutMs = 5_000): Promise<string> {
    return run([...(this.clients.birdc ?? ["birdc"]), "-s", this.socket, ...args], "", timeoutMs);
  }

  /** Several commands through one connection; each one's answer, in order. */
  async runAll(commands: string[], timeoutMs = 5_000): Promise<string[]> {
    const out = await run(
      [...(this.clients.birdcl ?? ["birdcl"]), "-s", this.socket],
      commands.map((c) => `${c}\n`).join(""),
      timeoutMs,
    );
    const answers = birdclAnswers(out, commands.length);
    if (answers.length < commands.length)
      throw new CommandError(
        `birdcl -s ${this.socket} answered ${answers.length} of ${commands.length} commands`,
        out,
      );
    return answers;
  }
}

/** birdcl's output for `count` commands from its input, split into each one's answer. */
export function birdclAnswers(out: string, count: number): string[] {
  return out
    .split(PROMPT)
    .slice(1, count + 1)
    .map((a) => a.slice(a.indexOf("\n") + 1));
}

/** A failure that means BIRD is not running (no socket, or nobody behind it). */
export function birdNotRunning(err: unknown): boolean {
  return err instanceof CommandError && /Unable to connect|Connection refused|No such file/.test(err.message);
}

/**
 * Resolves once no session exports a route (the withdrawals are out) or BIRD is not running
 * (nothing is announced); rejects after `timeoutMs`, naming what is still exported.
 */
export async function waitUntilWithdrawn(bird: BirdControl, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let exported: Map<string, number>;
    try {
      exported = exportedPerSession(await bird.run(["show", "protocols", "all"]));
    } catch (err) {
      if (birdNotRunning(err)) return;
      throw err;
    }
    if ([...exported.values()].every((n) => n === 0)) return;
    if (Date.now() > deadline)
      throw new Error(`VIPs still exported after ${timeoutMs} ms: ${JSON.stringify([...exported])}`);
    await sleep(50);
  }
}
