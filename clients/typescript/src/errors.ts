/** Typed errors: every answer of the server that is not a success is a `ProblemDetails`. */

import type { ProblemDetails } from "./models.js";

/** Anything this client throws. */
export class AgentApiError extends Error {
  override name = "AgentApiError";
}

/** The server could not be reached, or a stream could not be resumed, within the bound. */
export class ConnectionLost extends AgentApiError {
  override name = "ConnectionLost";
}

/**
 * An error answer of the server: `status` (HTTP), `kind` (the last part of the problem's `type`,
 * `urn:agent-api:error:<kind>`: `session_not_found`, `queue_full`, …), `detail` (inert text).
 */
export class ApiError extends AgentApiError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly kind: string,
    readonly title: string,
    readonly detail: string,
    readonly problem: Partial<ProblemDetails>,
  ) {
    super(`${title} (${status} ${kind}): ${detail}`);
  }
}

/** 400: the request is wrong. */
export class BadRequest extends ApiError { override name = "BadRequest"; }
/** 401: no token, or the wrong one. */
export class Unauthorized extends ApiError { override name = "Unauthorized"; }
/** 403: an option clients may not set, a host or an origin the server does not allow. */
export class Forbidden extends ApiError { override name = "Forbidden"; }
/** 404: no such session, turn, permission or question. */
export class NotFound extends ApiError { override name = "NotFound"; }
/** 409: the session ended, another server runs it, the id is taken, a reply came too late. */
export class Conflict extends ApiError { override name = "Conflict"; }
/** 429: the session's message queue or its subscribers are full. */
export class TooManyRequests extends ApiError { override name = "TooManyRequests"; }
/** 5xx: the server failed. */
export class ServerError extends ApiError { override name = "ServerError"; }

const BY_STATUS: Record<number, typeof ApiError> = {
  400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 429: TooManyRequests,
};

/** The typed error of an answer with `status` and (when it is one) a ProblemDetails body. */
export function fromProblem(status: number, body: unknown): ApiError {
  const problem = (body && typeof body === "object" ? body : {}) as Partial<ProblemDetails>;
  const url = String(problem.type ?? "");
  const kind = url ? (url.split(":").pop() ?? url) : "http_error";
  const Kind = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new Kind(status, kind, String(problem.title ?? `HTTP ${status}`), String(problem.detail ?? ""), problem);
}
