// Whether every onprem machine's SSH port answers, asked when the program runs (so at `pulumi
// preview`): a machine that is down, or a wrong host or port, is named before anything is planned,
// rather than after the other machines' commands have run. A TCP connection per host, all at once,
// each bounded in time (name resolution included).
import { connect } from "node:net";
import { ConfigError, problem } from "@portable-lb/core";
import type { OnpremEnvironmentConfig } from "../onpremEnvironment.ts";

/** How long each host may take to accept: long enough for a busy network, short for a preview. */
export const SSH_PROBE_TIMEOUT_MS = 5_000;

/** Resolves to undefined once host:port accepts a TCP connection, else to why not. */
function tcpProbe(host: string, port: number, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (why: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(why);
    };
    const timer = setTimeout(() => done(`no answer within ${timeoutMs / 1000} s`), timeoutMs);
    socket.once("connect", () => done(undefined));
    socket.once("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
  });
}

/** One problem per machine whose SSH port does not accept a connection, naming it and its host. */
export async function unreachableSshHosts(
  env: Pick<OnpremEnvironmentConfig, "nodes" | "ssh">,
  timeoutMs = SSH_PROBE_TIMEOUT_MS,
): Promise<string[]> {
  const results = await Promise.all(env.nodes.map((n) => tcpProbe(n.host, env.ssh.port, timeoutMs)));
  return env.nodes.flatMap((node, i) => {
    const why = results[i];
    return why === undefined
      ? []
      : [
          problem(
            `environment.nodes[${i}].host`,
            `node ${node.name}: SSH at ${node.host}:${env.ssh.port} did not answer (${why}); check that the machine is up, that sshd listens on environment.ssh.port and that this machine can reach it`,
            node.host,
          ),
        ];
  });
}

/** Throws one ConfigError naming every machine whose SSH port does not answer. */
export async function checkSshReachable(
  env: Pick<OnpremEnvironmentConfig, "nodes" | "ssh">,
  timeoutMs = SSH_PROBE_TIMEOUT_MS,
): Promise<void> {
  const problems = await unreachableSshHosts(env, timeoutMs);
  if (problems.length) throw new ConfigError(problems);
}
