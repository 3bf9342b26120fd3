// Loopback ports for the control plane: free ones picked by the kernel, or a requested one checked first.
import { createServer } from "node:net";

function listenOnce(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen({ host, port, exclusive: true }, () => {
      const addr = srv.address();
      const got = typeof addr === "object" && addr ? addr.port : port;
      srv.close(() => resolve(got));
    });
  });
}

export async function freePort(host: string): Promise<number> {
  return listenOnce(host, 0);
}

/** Throws a one-line error naming the port, its purpose and the fix when the port is taken. */
export async function ensurePortFree(host: string, port: number, purpose: string): Promise<number> {
  try {
    return await listenOnce(host, port);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
      throw new Error(
        `port ${host}:${port} (${purpose}) is already in use: stop what listens there (see 'ss -ltnp sport = :${port}') or pick another port`,
        { cause: err },
      );
    }
    throw err;
  }
}
