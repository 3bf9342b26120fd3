// Why a cloud API call failed, in the few classes the loop acts on: throttling and server errors are
// retried, a permission error is reported naming the IAM action and the resource, the rest reported.
// Reads AWS SDK v3 errors (name, $metadata.httpStatusCode) and Google API errors (code = HTTP status).

export type FailureCause =
  "throttled" | "server" | "network" | "permission" | "not-found" | "conflict" | "invalid";

export const RETRYABLE: ReadonlySet<FailureCause> = new Set(["throttled", "server", "network"]);

const AWS_THROTTLING = new Set([
  "RequestLimitExceeded",
  "Throttling",
  "ThrottlingException",
  "RequestThrottled",
]);
const AWS_PERMISSION = new Set([
  "UnauthorizedOperation",
  "AccessDenied",
  "AuthFailure",
  "AccessDeniedException",
]);
const NETWORK = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EAI_AGAIN", "UND_ERR_SOCKET"]);

interface CloudError {
  name?: string;
  code?: number | string;
  status?: number;
  $metadata?: { httpStatusCode?: number };
  cause?: unknown;
}

// google-gax reports REST errors with the gRPC status code it maps the HTTP status to.
const GRPC: Record<number, FailureCause> = {
  4: "server", // DEADLINE_EXCEEDED
  5: "not-found",
  6: "conflict", // ALREADY_EXISTS
  7: "permission", // PERMISSION_DENIED
  8: "throttled", // RESOURCE_EXHAUSTED
  10: "conflict", // ABORTED
  13: "server", // INTERNAL
  14: "server", // UNAVAILABLE
  16: "permission", // UNAUTHENTICATED
};

function httpStatus(e: CloudError): number | undefined {
  if (typeof e.code === "number" && e.code >= 100) return e.code;
  return e.$metadata?.httpStatusCode ?? e.status;
}

export function failureCause(err: unknown): FailureCause {
  const e = (err ?? {}) as CloudError;
  if (e.name && AWS_THROTTLING.has(e.name)) return "throttled";
  if (e.name && AWS_PERMISSION.has(e.name)) return "permission";
  if (e.name?.startsWith("InvalidRoute.NotFound") || e.name === "InvalidRouteTableID.NotFound")
    return "not-found";
  if (e.name === "RouteAlreadyExists") return "conflict";
  const code = typeof e.code === "string" ? e.code : ((e.cause as CloudError | undefined)?.code as string);
  if (typeof code === "string" && NETWORK.has(code)) return "network";
  if (typeof e.code === "number" && e.code < 100) return GRPC[e.code] ?? "invalid";
  const status = httpStatus(e);
  if (status === 429) return "throttled";
  if (status === 401 || status === 403) return "permission";
  if (status === 404) return "not-found";
  if (status === 409) return "conflict";
  if (status !== undefined && status >= 500) return "server";
  if (e.name === "TimeoutError" || e.name === "AbortError" || e.name === "FetchError") return "network";
  return "invalid";
}

/** A failed call told for people: the cause, and for a permission error the action and resource. */
export class CloudCallError extends Error {
  readonly reason: FailureCause;
  readonly action: string;
  readonly resource: string;
  constructor(action: string, resource: string, err: unknown) {
    const cause = failureCause(err);
    const said = err instanceof Error ? err.message : String(err);
    super(
      cause === "permission"
        ? `missing permission ${action} on ${resource}: grant it to the LB instances' role (${said})`
        : `${action} on ${resource} failed (${cause}): ${said}`,
    );
    this.name = "CloudCallError";
    this.reason = cause;
    this.action = action;
    this.resource = resource;
  }
}
