"""The asyncio client of `agent-api serve` (`spec/http-api.md`)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    TypeVar,
    Union,
    cast,
)

import httpx

from .errors import ApiError, ConnectionLost, from_problem
from .models import (
    AgentInfo,
    ImageInput,
    PermissionEventData,
    QuestionEventData,
    SessionInfo,
    SessionUsage,
    StoredSessionInfo,
    TurnOutcome,
    UniversalEvent,
)
from .sse import frames
from .text import AnswerText

#: What a permission callback answers: `"once"`, `"always"`, `"reject"`, or `True` (once) /
#: `False` (reject); `None` leaves the request waiting (answer it some other way).
PermissionReply = Union[str, bool, None]
#: What a question callback answers: the chosen answers (e.g. `["blue"]`), or `None` to reject it.
QuestionReply = Optional[Sequence[str]]
PermissionCallback = Callable[
    [PermissionEventData], Union[PermissionReply, Awaitable[PermissionReply]]
]
QuestionCallback = Callable[[QuestionEventData], Union[QuestionReply, Awaitable[QuestionReply]]]
EventCallback = Callable[[UniversalEvent], Union[None, Awaitable[None]]]

_TURN = re.compile(r"^turn (\d+)$")

_T = TypeVar("_T")


async def _called(result: Union[_T, Awaitable[_T]]) -> _T:
    """What a callback returned, awaited when the callback is async (callers may pass either)."""
    if inspect.isawaitable(result):
        return cast(_T, await result)
    return result


def _answered_before(answered: set[str], request_id: str) -> bool:
    """Whether the request `request_id` was answered before (a turn's events may repeat it);
    from now on it is."""
    if request_id in answered:
        return True
    answered.add(request_id)
    return False


@dataclass
class TurnResult:
    """How a turn ended.

    `status` is `completed`, `failed` or `cancelled` (`ended` when the session ended with it);
    `text` the final answer (the last assistant message's text, as `TurnOutcome.finalText`;
    reasoning excluded) and `reasoning` apart; `error` the terminal error's
    data (`code`, `message`) of a turn that did not complete; `usage` where the agent reports it;
    `events` every event of the turn, in order, each once.
    """

    session_id: str
    turn: Optional[int]
    status: str
    text: str
    reasoning: str
    usage: Optional[SessionUsage]
    error: Optional[Dict[str, Any]]
    events: List[UniversalEvent] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the turn completed."""
        return self.status == "completed"


def turn_boundary(event: Mapping[str, Any]) -> Optional[tuple[str, int]]:
    """`("turn_started" | "turn_completed" | "turn_failed", n)` when `event` is the session's
    delimiter of turn `n` (a daemon status item; an agent's own status with the same label is
    not one)."""
    if event.get("type") != "item.completed" or event.get("source") != "daemon":
        return None
    item = (event.get("data") or {}).get("item") or {}
    for part in item.get("content") or []:
        label = part.get("label")
        if part.get("type") == "status" and label in (
            "turn_started",
            "turn_completed",
            "turn_failed",
        ):
            match = _TURN.match(str(part.get("detail") or ""))
            if match:
                return (str(label), int(match.group(1)))
    return None


class TurnStream:
    """The events of one turn as they come (`async for event in stream`), then its
    [`TurnResult`] (`await stream.result()`). Made by `AsyncSession.stream`."""

    def __init__(self, session: "AsyncSession", body: Dict[str, Any],
                 on_permission: Optional[PermissionCallback],
                 on_question: Optional[QuestionCallback]) -> None:
        self._session = session
        self._body = body
        self._on_permission = on_permission
        self._on_question = on_question
        self._result: Optional[TurnResult] = None
        self._iterating = False

    def __aiter__(self) -> AsyncIterator[UniversalEvent]:
        if self._iterating:
            raise RuntimeError("a turn's stream is read once")
        self._iterating = True
        return self._events()

    async def result(self) -> TurnResult:
        """The turn's outcome (reads the rest of its events first)."""
        if self._result is None:
            if not self._iterating:
                async for _ in self:
                    pass
            if self._result is None:
                raise RuntimeError("the turn's stream was not read to its end")
        return self._result

    async def _events(self) -> AsyncIterator[UniversalEvent]:
        session = self._session
        api = session.api
        before = await session.info()
        last = int(before["eventCount"])
        turn: Optional[int] = None
        events: List[UniversalEvent] = []
        text = AnswerText()
        closing: Optional[str] = None
        done = False
        answered: set[str] = set()

        def take(event: UniversalEvent) -> bool:
            """Keeps an event of this turn; returns whether it ends the turn."""
            nonlocal turn, closing
            boundary = turn_boundary(event)
            if boundary and boundary[0] == "turn_started" and turn is None:
                turn = boundary[1]
            events.append(event)
            text.feed(event)
            if event["type"] == "session.ended":
                closing = closing or "ended"
                return True
            if boundary and boundary[1] == turn and boundary[0] != "turn_started":
                closing = "completed" if boundary[0] == "turn_completed" else "failed"
                # A failed turn's terminal error follows its `turn_failed`.
                return closing == "completed"
            return closing == "failed" and event["type"] == "error"

        # The turn's own stream first; it ends after the turn, or where the turn waits on us.
        response = await api._open_stream(
            "POST", f"/v1/sessions/{_q(session.id)}/messages/stream", json=self._body
        )
        stream: Optional[httpx.Response] = response
        try:
            while not done:
                if stream is None:
                    stream = await api._reconnect(session, last)
                try:
                    async for frame in frames(stream.aiter_lines()):
                        if frame.data == "" or frame.id is None:
                            continue
                        sequence = int(frame.id)
                        if sequence <= last:
                            continue  # already seen: never twice
                        event = cast(UniversalEvent, json.loads(frame.data))
                        last = sequence
                        boundary = turn_boundary(event)
                        # On the session's stream, another turn's events are not this one's.
                        if turn is not None and boundary is not None and boundary[1] != turn:
                            continue
                        ended = take(event)
                        yield event
                        await self._answer(event, answered)
                        if ended:
                            done = True
                            break
                except (httpx.TransportError, httpx.StreamError):
                    pass  # the connection broke: resumed below from the last sequence
                finally:
                    await stream.aclose()
                    stream = None
        finally:
            if stream is not None:
                await stream.aclose()
        outcome: Optional[TurnOutcome] = None
        if turn is not None:
            try:
                outcome = await session.outcome(turn)
            except ApiError:
                outcome = None  # not kept (a restarted server): the events say it all
        error = next(
            (dict(e["data"]) for e in reversed(events) if e["type"] == "error"), None
        )
        status = closing or "failed"
        if status == "failed" and error and error.get("code") == "cancelled":
            status = "cancelled"
        if outcome and outcome.get("status") in ("completed", "failed", "cancelled"):
            status = outcome["status"]
        answer = text.final
        if outcome and "finalText" in outcome and status == "completed":
            answer = outcome["finalText"]
        self._result = TurnResult(
            session_id=session.id,
            turn=turn,
            status=status,
            text=answer,
            reasoning=text.reasoning,
            usage=outcome.get("usage") if outcome else None,
            error=error if status != "completed" else None,
            events=events,
        )

    async def _answer(self, event: UniversalEvent, answered: set[str]) -> None:
        """Calls the callback of a permission or question the turn asks, and replies."""
        data = event["data"]
        if event["type"] == "permission.requested" and self._on_permission:
            permission = cast(PermissionEventData, data)
            if _answered_before(answered, permission["permission_id"]):
                return
            reply = await _called(self._on_permission(permission))
            if reply is None:
                return
            if isinstance(reply, bool):
                reply = "once" if reply else "reject"
            await self._session.reply_permission(permission["permission_id"], reply)
        elif event["type"] == "question.requested" and self._on_question:
            question = cast(QuestionEventData, data)
            if _answered_before(answered, question["question_id"]):
                return
            answer = await _called(self._on_question(question))
            if answer is None:
                await self._session.reject_question(question["question_id"])
            else:
                await self._session.reply_question(question["question_id"], list(answer))


class AsyncSession:
    """A session of the server, by id (`AsyncClient.create_session` or `AsyncClient.session`)."""

    def __init__(self, api: "AsyncClient", session_id: str) -> None:
        self.api = api
        self.id = session_id

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def info(self) -> SessionInfo:
        """`GET /v1/sessions/{id}`."""
        return cast(SessionInfo, await self.api.request("GET", f"/v1/sessions/{_q(self.id)}"))

    def stream(
        self,
        message: str,
        *,
        on_permission: Optional[PermissionCallback] = None,
        on_question: Optional[QuestionCallback] = None,
        images: Optional[List[ImageInput]] = None,
        agent_mode: Optional[str] = None,
    ) -> TurnStream:
        """Sends `message` and streams its turn's events (a message sent while another turn runs
        waits in the session's queue, then streams). The stream survives a broken connection or a
        restarted server: it resumes from the last event it got (`Last-Event-ID`), with no gap and
        no duplicate, bringing a `resumable` session back first. Permission and question callbacks
        (plain or `async` functions) are called as the turn asks; their answer is sent for them."""
        body: Dict[str, Any] = {"message": message}
        if images is not None:
            body["images"] = images
        if agent_mode is not None:
            body["agentMode"] = agent_mode
        return TurnStream(self, body, on_permission, on_question)

    async def send(
        self,
        message: str,
        *,
        on_event: Optional[EventCallback] = None,
        on_permission: Optional[PermissionCallback] = None,
        on_question: Optional[QuestionCallback] = None,
        images: Optional[List[ImageInput]] = None,
        agent_mode: Optional[str] = None,
    ) -> TurnResult:
        """Sends `message`, follows its turn (see [`AsyncSession.stream`]), calling `on_event` for
        each event, and returns how it ended."""
        stream = self.stream(
            message,
            on_permission=on_permission,
            on_question=on_question,
            images=images,
            agent_mode=agent_mode,
        )
        async for event in stream:
            if on_event is not None:
                await _called(on_event(event))
        return await stream.result()

    async def send_and_wait(self, message: str, *, timeout: Optional[int] = None) -> TurnOutcome:
        """`POST …/messages?wait=true`: the turn's outcome, in one request (`waiting` when it asks
        a permission or a question, `running` when `timeout` seconds pass first)."""
        params: Dict[str, Any] = {"wait": "true"}
        if timeout is not None:
            params["timeout"] = timeout
        return cast(
            TurnOutcome,
            await self.api.request(
                "POST", f"/v1/sessions/{_q(self.id)}/messages", json={"message": message},
                params=params, read_timeout=None,
            ),
        )

    async def post(self, message: str) -> None:
        """`POST …/messages`: sends `message` (queued while a turn runs) and returns at once."""
        await self.api.request("POST", f"/v1/sessions/{_q(self.id)}/messages", json={"message": message})

    async def outcome(self, turn: int, *, wait: bool = False, timeout: Optional[int] = None) -> TurnOutcome:
        """`GET …/turns/{turn}`: where turn `turn` is, or how it ended."""
        params: Dict[str, Any] = {}
        if wait:
            params["wait"] = "true"
        if timeout is not None:
            params["timeout"] = timeout
        return cast(
            TurnOutcome,
            await self.api.request(
                "GET", f"/v1/sessions/{_q(self.id)}/turns/{turn}", params=params, read_timeout=None
            ),
        )

    async def cancel(self) -> None:
        """Cancels the turn in progress; the messages queued behind it are dropped."""
        await self.api.request("POST", f"/v1/sessions/{_q(self.id)}/cancel")

    async def steer(self, message: str, *, images: Optional[List[ImageInput]] = None) -> None:
        """Adds `message` to the turn in progress, where the agent can be steered."""
        body: Dict[str, Any] = {"message": message}
        if images is not None:
            body["images"] = images
        await self.api.request("POST", f"/v1/sessions/{_q(self.id)}/steer", json=body)

    async def terminate(self) -> None:
        """Ends the session (its turn cancelled, its agent closed)."""
        await self.api.request("POST", f"/v1/sessions/{_q(self.id)}/terminate")

    async def resume(self) -> SessionInfo:
        """Brings a `resumable` session back on the server (a turn its server died in is closed as
        interrupted)."""
        return cast(SessionInfo, await self.api.request("POST", f"/v1/sessions/{_q(self.id)}/resume"))

    async def reply_permission(self, permission_id: str, reply: str) -> None:
        """`once`, `always` or `reject`."""
        await self.api.request(
            "POST",
            f"/v1/sessions/{_q(self.id)}/permissions/{_q(permission_id)}/reply",
            json={"reply": reply},
        )

    async def reply_question(self, question_id: str, answers: List[str]) -> None:
        await self.api.request(
            "POST",
            f"/v1/sessions/{_q(self.id)}/questions/{_q(question_id)}/reply",
            json={"answers": [answers]},
        )

    async def reject_question(self, question_id: str) -> None:
        await self.api.request(
            "POST", f"/v1/sessions/{_q(self.id)}/questions/{_q(question_id)}/reject"
        )

    async def events(self, offset: int = 0, *, include_raw: bool = False) -> List[UniversalEvent]:
        """Every stored event after `offset`, read by pages."""
        return await self.api._pages(f"/v1/sessions/{_q(self.id)}/events", offset, include_raw)

    async def follow(self, offset: int = 0) -> AsyncIterator[UniversalEvent]:
        """The session's events after `offset`, then the live ones as they come, until it ends;
        resumed from the last one after a broken connection or a restarted server."""
        last = offset
        while True:
            stream = await self.api._reconnect(self, last)
            try:
                async for frame in frames(stream.aiter_lines()):
                    if frame.id is None or int(frame.id) <= last:
                        continue
                    last = int(frame.id)
                    yield cast(UniversalEvent, json.loads(frame.data))
                info = await self.info()
                if info["ended"]:
                    return
            except (httpx.TransportError, httpx.StreamError):
                pass
            finally:
                await stream.aclose()


class AsyncClient:
    """A client of one `agent-api serve`.

    ```python
    async with AsyncClient("http://127.0.0.1:2468", token=TOKEN) as api:
        session = await api.create_session(agent="scripted")
        result = await session.send("Say hello", on_permission=lambda p: "once")
        print(result.text)
    ```

    `reconnect_timeout` bounds how long a stream tries to come back after its connection broke
    (the server restarting): past it, `ConnectionLost`.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:2468",
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        reconnect_timeout: float = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.reconnect_timeout = reconnect_timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = timeout
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Optional[Any] = None,
        params: Optional[Mapping[str, Any]] = None,
        read_timeout: Optional[float] = -1.0,
    ) -> Any:
        """One request; its JSON body (`None` when empty). Raises the `ApiError` of a problem."""
        timeout = self._timeout if read_timeout == -1.0 else httpx.Timeout(self._timeout, read=read_timeout)
        try:
            response = await self._http.request(
                method, path, json=json, params=dict(params or {}), timeout=timeout
            )
        except httpx.TransportError as error:
            raise ConnectionLost(f"{method} {path}: {error}") from error
        return _body(response)

    async def health(self) -> Dict[str, Any]:
        return cast(Dict[str, Any], await self.request("GET", "/v1/health"))

    async def agents(self) -> List[AgentInfo]:
        return cast(List[AgentInfo], (await self.request("GET", "/v1/agents"))["agents"])

    async def sessions(self) -> List[SessionInfo]:
        return cast(List[SessionInfo], (await self.request("GET", "/v1/sessions"))["sessions"])

    def session(self, session_id: str) -> AsyncSession:
        """The session `session_id` (no request is sent)."""
        return AsyncSession(self, session_id)

    async def create_session(
        self,
        session_id: Optional[str] = None,
        *,
        agent: str,
        options: Optional[Dict[str, Any]] = None,
        **settings: Any,
    ) -> AsyncSession:
        """Creates a session (`POST /v1/sessions/{id}`; a random id when none is given).
        `settings` are `CreateSessionRequest`'s fields (`permissionMode`, `model`, `agentMode`,
        …); `options` the backend's own keys."""
        session_id = session_id or f"py-{uuid.uuid4().hex[:12]}"
        body: Dict[str, Any] = {"agent": agent, **settings}
        if options is not None:
            body["options"] = options
        await self.request("POST", f"/v1/sessions/{_q(session_id)}", json=body)
        return AsyncSession(self, session_id)

    async def history(self, agent: str, *, cwd: Optional[str] = None) -> List[StoredSessionInfo]:
        """The agent's own stored sessions (`GET /v1/agents/{agent}/history`)."""
        params = {"cwd": cwd} if cwd else {}
        body = await self.request("GET", f"/v1/agents/{_q(agent)}/history", params=params)
        return cast(List[StoredSessionInfo], body["sessions"])

    async def history_events(self, agent: str, native_session_id: str) -> List[UniversalEvent]:
        """One of the agent's stored sessions, read back as universal events."""
        return await self._pages(
            f"/v1/agents/{_q(agent)}/history/{_q(native_session_id)}/events", 0, False
        )

    async def _pages(self, path: str, offset: int, include_raw: bool) -> List[UniversalEvent]:
        events: List[UniversalEvent] = []
        while True:
            params: Dict[str, Any] = {"offset": offset}
            if include_raw:
                params["include_raw"] = "true"
            page = await self.request("GET", path, params=params)
            events.extend(page["events"])
            if not page["hasMore"] or not page["events"]:
                return events
            offset = int(page["events"][-1]["sequence"])

    async def _open_stream(
        self, method: str, path: str, *, json: Optional[Any] = None,
        headers: Optional[Dict[str, str]] = None,
    ) -> httpx.Response:
        """An SSE response, open; raises the typed error of a refusal."""
        timeout = httpx.Timeout(self._timeout, read=60.0)  # keep-alives come every 15 s
        request = self._http.build_request(method, path, json=json, headers=headers, timeout=timeout)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as error:
            raise ConnectionLost(f"{method} {path}: {error}") from error
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise _error(response)
        return response

    async def _reconnect(self, session: AsyncSession, last: int) -> httpx.Response:
        """The session's SSE after `last`, trying again while the server is away (bounded by
        `reconnect_timeout`). A session left `resumable` by a stopped server is brought back
        first: a turn its server died in is then closed, so its end is on the stream."""
        deadline = asyncio.get_running_loop().time() + self.reconnect_timeout
        pause = 0.05
        while True:
            try:
                info = await session.info()
                if info.get("state") == "resumable":
                    await session.resume()
                return await self._open_stream(
                    "GET",
                    f"/v1/sessions/{_q(session.id)}/events/sse",
                    headers={"Last-Event-ID": str(last)},
                )
            except ConnectionLost as error:
                if asyncio.get_running_loop().time() + pause > deadline:
                    raise ConnectionLost(
                        f"session {session.id}: the server did not come back within "
                        f"{self.reconnect_timeout} s: {error}"
                    ) from error
            except ApiError as error:
                # Another server still owns it while its lease runs out, or a restart is under way.
                if error.status not in (409, 500, 502, 503) or asyncio.get_running_loop().time() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


def _q(segment: str) -> str:
    """`segment` as one path segment (escaped)."""
    from urllib.parse import quote

    return quote(segment, safe="")


def _body(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _error(response)
    if not response.content:
        return None
    return response.json()


def _error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    return from_problem(response.status_code, body)
