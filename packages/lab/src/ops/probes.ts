// Small checks the lab's pieces wait on.
import { connect } from "node:net";

/** Whether a TCP connection to host:port opens within a second. */
export function connectsTo(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 1_000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket
      .once("connect", () => done(true))
      .once("timeout", () => done(false))
      .once("error", () => done(false));
  });
}
