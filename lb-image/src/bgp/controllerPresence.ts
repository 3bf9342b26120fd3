// Tells the speaker's watchdog at once when the controller's process is gone (crash, OOM kill,
// SIGKILL): the controller listens on a unix socket in the BIRD run folder the two containers
// share, the watchdog stays connected, and the kernel closes the connection the moment the process
// dies. The announcement lease's TTL then only has to cover a controller that hangs, which it can
// afford to wait out a little longer on a loaded node instead of withdrawing a healthy pod.
import { BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { rm } from "node:fs/promises";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";

/** The controller's side: listens for as long as the process lives. */
export class ControllerPresence {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  readonly path: string;

  private constructor(server: Server, path: string) {
    this.server = server;
    this.path = path;
    server.on("connection", (s) => {
      this.sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  static async listen(runDir: string): Promise<ControllerPresence> {
    const path = join(runDir, BIRD_RUN_FILES.controllerSocket);
    // A previous controller's socket file stays behind it (the folder outlives containers).
    await rm(path, { force: true });
    const server = createServer();
    const presence = new ControllerPresence(server, path);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, resolve);
    });
    return presence;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The watchdog's side: one connection to the controller, reopened on demand. */
export class ControllerPresenceWatch {
  private readonly path: string;
  private readonly onChange: (present: boolean) => void;
  private socket: Socket | undefined;
  private connected = false;

  constructor(runDir: string, onChange: (present: boolean) => void) {
    this.path = join(runDir, BIRD_RUN_FILES.controllerSocket);
    this.onChange = onChange;
  }

  /** Connected to a live controller now. */
  get present(): boolean {
    return this.connected;
  }

  /** Connects when not connected (each watchdog check calls it); resolves once it knows. */
  ensure(): Promise<void> {
    if (this.socket) return Promise.resolve();
    return new Promise((resolve) => {
      const s = createConnection(this.path);
      this.socket = s;
      s.once("connect", () => {
        this.connected = true;
        this.onChange(true);
        resolve();
      });
      s.on("error", () => undefined);
      s.once("close", () => {
        this.socket = undefined;
        if (this.connected) {
          this.connected = false;
          this.onChange(false);
        }
        resolve();
      });
    });
  }

  stop(): void {
    this.socket?.destroy();
  }
}
