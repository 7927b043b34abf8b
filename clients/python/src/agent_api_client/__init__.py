"""A typed client of `agent-api serve` (the universal session API over HTTP and SSE).

```python
from agent_api_client import Client

with Client("http://127.0.0.1:2468", token="…") as api:
    session = api.create_session(agent="scripted")
    print(session.send("Say hello", on_permission=lambda request: "once").text)
```

Async first ([`AsyncClient`]), with a blocking [`Client`]; typed models of the server's bodies and
the universal events ([`models`]); typed errors from the server's ProblemDetails ([`errors`]); the
answer told from the reasoning ([`AnswerText`]).
"""

from . import models
from .client import AsyncClient, AsyncSession, TurnResult, TurnStream, turn_boundary
from .errors import (
    AgentApiError,
    ApiError,
    BadRequest,
    Conflict,
    ConnectionLost,
    Forbidden,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
)
from .sync import Client, Session
from .text import AnswerText, answer_of, is_reasoning_item, reasoning_of

__version__ = "0.1.0"

__all__ = [
    "AgentApiError",
    "AnswerText",
    "ApiError",
    "AsyncClient",
    "AsyncSession",
    "BadRequest",
    "Client",
    "Conflict",
    "ConnectionLost",
    "Forbidden",
    "NotFound",
    "ServerError",
    "Session",
    "TooManyRequests",
    "TurnResult",
    "TurnStream",
    "Unauthorized",
    "answer_of",
    "is_reasoning_item",
    "models",
    "reasoning_of",
    "turn_boundary",
]
