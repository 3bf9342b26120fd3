// moto's server (PyPI moto[server], installed by the bootstrap into the cache): a real HTTP server
// speaking the EC2 API, on loopback at a port it picks and reports. Stopped, by its pid, with stop().
import { EC2Client } from "@aws-sdk/client-ec2";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../repoRoot.ts";

export const MOTO_REGION = "us-east-1";
// A loaded 2-core machine takes moto (Python, Flask) well over 20 s to start.
const START_TIMEOUT_MS = 60_000;

/** The moto_server the bootstrap installed (scripts/bootstrap/moto.sh), keyed by MOTO_VERSION. */
export function motoServerBinary(): string {
  const version = /^MOTO_VERSION=(\S+)$/m.exec(
    readFileSync(join(repoRoot(), "scripts/versions.env"), "utf8"),
  )?.[1];
  const cache = process.env.PORTABLE_LB_CACHE ?? join(process.env.HOME ?? "/root", ".cache/portable-lb");
  const bin = join(cache, "tools", `moto-${version}`, "venv/bin/moto_server");
  if (!existsSync(bin))
    throw new Error(`${bin} is missing: run scripts/bootstrap.sh (it installs moto[server] ${version})`);
  return bin;
}

export interface MotoServer {
  endpoint: string;
  port: number;
  /** An EC2 client pointed at it, with fake static credentials. */
  ec2(): EC2Client;
  stop(): Promise<void>;
  /** Synchronous last resort (an exit handler): SIGKILL by its pid. */
  killNow(): void;
}

export const MOTO_CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };

export async function startMoto(): Promise<MotoServer> {
  const child: ChildProcess = spawn(motoServerBinary(), ["-H", "127.0.0.1", "-p", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      // Not left behind: a late server would keep its parent alive.
      child.kill("SIGKILL");
      reject(new Error(`moto_server did not report a port in ${START_TIMEOUT_MS} ms: ${output}`));
    }, START_TIMEOUT_MS);
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = /Running on http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`moto_server exited (${code}): ${output}`));
    });
  });
  // Keep draining its request log so a full pipe never blocks it.
  child.stdout!.resume();
  child.stderr!.resume();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    port,
    ec2: () =>
      new EC2Client({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS, maxAttempts: 1 }),
    killNow: () => void child.kill("SIGKILL"),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
