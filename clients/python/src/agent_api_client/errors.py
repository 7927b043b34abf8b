"""Typed errors: every answer of the server that is not a success is a `ProblemDetails`
(`spec/http-api.md`, Bodies), raised as the `ApiError` subclass of its status."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class AgentApiError(Exception):
    """Anything this client raises."""


class ConnectionLost(AgentApiError):
    """The server could not be reached, or a stream could not be resumed, within the bound."""


class ApiError(AgentApiError):
    """An error answer of the server.

    `status` is the HTTP status, `kind` the last part of the problem's `type`
    (`urn:agent-api:error:<kind>`: `session_not_found`, `queue_full`, …), `detail` what happened
    (inert text: never markup).
    """

    def __init__(self, status: int, kind: str, title: str, detail: str, problem: Dict[str, Any]):
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.problem = problem
        super().__init__(f"{title} ({status} {kind}): {detail}")


class BadRequest(ApiError):
    """400: the request is wrong (an empty message, an unknown agent, an option the agent lacks)."""


class Unauthorized(ApiError):
    """401: no token, or the wrong one."""


class Forbidden(ApiError):
    """403: an option clients may not set, or a host or origin the server does not allow."""


class NotFound(ApiError):
    """404: no such session, turn, permission or question."""


class Conflict(ApiError):
    """409: the session ended, another server runs it, the id is taken, or a reply came too late."""


class TooManyRequests(ApiError):
    """429: the session's message queue or its subscribers are full."""


class ServerError(ApiError):
    """5xx: the server failed (its store, a bound on sessions)."""


_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: TooManyRequests,
}


def from_problem(status: int, body: Optional[Any]) -> ApiError:
    """The typed error of an answer with `status` and (when it is one) a ProblemDetails body."""
    problem: Dict[str, Any] = body if isinstance(body, dict) else {}
    kind_url = str(problem.get("type") or "")
    kind = kind_url.rsplit(":", 1)[-1] if kind_url else "http_error"
    title = str(problem.get("title") or f"HTTP {status}")
    detail = str(problem.get("detail") or "")
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, kind, title, detail, problem)
