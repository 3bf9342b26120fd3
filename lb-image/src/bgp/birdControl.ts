// BIRD's control socket: `birdc` for one command (a reload, a withdrawal: rare, and birdc's own
// messages are what an operator knows), one kept connection for the polls (birdSocket.ts). Used by
// the controller (SpeakerControl, SessionMonitor) and by the speaker container's commands.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError, run } from "../dataplane/exec.ts";
import { exportedPerSession } from "./birdOutput.ts";
import { BirdSocket } from "./birdSocket.ts";

type Argv = [string, ...string[]];

export interface BirdClients {
  birdc?: Argv;
}

export class BirdControl {
  readonly socket: string;
  private readonly clients: BirdClients;
  private readonly connection: BirdSocket;

  constructor(socket: string, clients: BirdClients = {}) {
    this.socket = socket;
    this.clients = clients;
    this.connection = new BirdSocket(socket);
  }

  /** The socket exists: BIRD runs, or is starting, or died and left it (commands then fail). */
  get present(): boolean {
    return existsSync(this.socket);
  }

  /** One command (`birdc -s SOCKET ARGS…`); rejects with birdc's message. */
  run(args: string[], timeoutMs = 5_000): Promise<string> {
    return run([...(this.clients.birdc ?? ["birdc"]), "-s", this.socket, ...args], "", timeoutMs);
  }

  /** Several commands through the kept connection; each one's answer (as birdc prints it), in order. */
  runAll(commands: string[], timeoutMs = 5_000): Promise<string[]> {
    return this.connection.runAll(commands, timeoutMs);
  }

  /** Closes the kept connection. */
  close(): void {
    this.connection.close();
  }
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
