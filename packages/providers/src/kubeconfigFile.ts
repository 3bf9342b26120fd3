// The kubeconfig a `kubeconfig` environment names: read and parsed when the program runs (so at
// `pulumi preview`), and its cluster asked for its version, so that a wrong file or a cluster that
// is down is reported before anything is planned against it.
import { readFileSync } from "node:fs";
import {
  ApiException,
  KubeConfig,
  Observable,
  VersionApi,
  type RequestContext,
  type ResponseContext,
} from "@kubernetes/client-node";
import { ConfigError, problem } from "@portable-lb/core";

const FIELD = "environment.kubeconfig";

export interface KubeconfigFile {
  /** The file's text, as the Kubernetes provider takes it. */
  contents: string;
  /** The API server of its current context. */
  server: string;
  parsed: KubeConfig;
}

/** Reads and parses the kubeconfig at `path` (as written, ~ allowed); throws ConfigError naming the file. */
export function readKubeconfig(path: string): KubeconfigFile {
  const file = path.replace(/^~(?=\/)/, process.env.HOME ?? "~");
  let contents: string;
  try {
    contents = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(
      `${FIELD}: cannot read ${JSON.stringify(path)} (${(err as Error).message}); point it at an existing kubeconfig file`,
    );
  }
  const notKubeconfig = (why: string) =>
    new ConfigError(
      problem(
        FIELD,
        `${file} is not a kubeconfig (${why}); point it at your cluster's kubeconfig, e.g. ~/.kube/config`,
        path,
      ),
    );
  const parsed = new KubeConfig();
  try {
    parsed.loadFromString(contents);
  } catch (err) {
    throw notKubeconfig((err as Error).message.split("\n")[0]!);
  }
  const server = parsed.getCurrentCluster()?.server;
  if (!parsed.getCurrentContext() || !server)
    throw notKubeconfig("it has no current-context whose cluster names a server");
  return { contents, server, parsed };
}

/** How long the probe waits for the API server: long enough for a loaded one, short for a preview. */
export const PROBE_TIMEOUT_MS = 3_000;

/**
 * Asks the cluster for its version. Returns undefined when it answered (with any HTTP status: the
 * server is there), else what went wrong, naming the server.
 */
export async function probeCluster(
  kubeconfig: KubeconfigFile,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<string | undefined> {
  const api = kubeconfig.parsed.makeApiClient(VersionApi);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    await api.getCode(
      {},
      {
        middleware: [
          {
            pre: (ctx: RequestContext) => {
              ctx.setSignal(signal);
              return new Observable(Promise.resolve(ctx));
            },
            post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
          },
        ],
        middlewareMergeStrategy: "append",
      },
    );
    return undefined;
  } catch (err) {
    // An HTTP error status is an answer.
    if (err instanceof ApiException) return undefined;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = signal.aborted
      ? `no answer within ${timeoutMs / 1000} s`
      : (cause?.code ?? cause?.message ?? (err as Error).message);
    return `${FIELD}: the cluster at ${kubeconfig.server} did not answer (${why}); check that it runs and that this machine can reach it`;
  }
}
