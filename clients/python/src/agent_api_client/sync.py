"""The blocking client: [`AsyncClient`]'s calls, run on an event loop of its own (a thread), for
programs that are not async. Callbacks may be plain functions; they run on that loop's thread."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Coroutine, Dict, Generator, List, Optional, TypeVar

from .client import (
    AsyncClient,
    AsyncSession,
    EventCallback,
    PermissionCallback,
    QuestionCallback,
    TurnResult,
)
from .models import (
    AgentInfo,
    ImageInput,
    SessionInfo,
    StoredSessionInfo,
    TurnOutcome,
    UniversalEvent,
)

T = TypeVar("T")


class _Loop:
    """An event loop running on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class Session:
    """A session, blocking (see [`AsyncSession`])."""

    def __init__(self, inner: AsyncSession, loop: _Loop) -> None:
        self._inner = inner
        self._loop = loop
        self.id = inner.id

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def info(self) -> SessionInfo:
        return self._loop.run(self._inner.info())

    def send(
        self,
        message: str,
        *,
        on_event: Optional[EventCallback] = None,
        on_permission: Optional[PermissionCallback] = None,
        on_question: Optional[QuestionCallback] = None,
        images: Optional[List[ImageInput]] = None,
        agent_mode: Optional[str] = None,
    ) -> TurnResult:
        """Sends `message` and returns how its turn ended ([`AsyncSession.send`])."""
        return self._loop.run(
            self._inner.send(
                message,
                on_event=on_event,
                on_permission=on_permission,
                on_question=on_question,
                images=images,
                agent_mode=agent_mode,
            )
        )

    def stream(
        self,
        message: str,
        *,
        on_permission: Optional[PermissionCallback] = None,
        on_question: Optional[QuestionCallback] = None,
    ) -> Generator[UniversalEvent, None, TurnResult]:
        """The turn's events as they come; the generator's return value is the `TurnResult`
        (`result = yield from session.stream(…)`)."""
        items: "queue.Queue[Any]" = queue.Queue(maxsize=256)
        end = object()

        async def pump() -> TurnResult:
            stream = self._inner.stream(message, on_permission=on_permission, on_question=on_question)
            try:
                async for event in stream:
                    await asyncio.get_running_loop().run_in_executor(None, items.put, event)
                return await stream.result()
            finally:
                await asyncio.get_running_loop().run_in_executor(None, items.put, end)

        future = asyncio.run_coroutine_threadsafe(pump(), self._loop.loop)
        while True:
            item = items.get()
            if item is end:
                break
            yield item
        return future.result()

    def send_and_wait(self, message: str, *, timeout: Optional[int] = None) -> TurnOutcome:
        return self._loop.run(self._inner.send_and_wait(message, timeout=timeout))

    def post(self, message: str) -> None:
        self._loop.run(self._inner.post(message))

    def outcome(self, turn: int, *, wait: bool = False, timeout: Optional[int] = None) -> TurnOutcome:
        return self._loop.run(self._inner.outcome(turn, wait=wait, timeout=timeout))

    def cancel(self) -> None:
        self._loop.run(self._inner.cancel())

    def steer(self, message: str, *, images: Optional[List[ImageInput]] = None) -> None:
        self._loop.run(self._inner.steer(message, images=images))

    def terminate(self) -> None:
        self._loop.run(self._inner.terminate())

    def resume(self) -> SessionInfo:
        return self._loop.run(self._inner.resume())

    def reply_permission(self, permission_id: str, reply: str) -> None:
        self._loop.run(self._inner.reply_permission(permission_id, reply))

    def reply_question(self, question_id: str, answers: List[str]) -> None:
        self._loop.run(self._inner.reply_question(question_id, answers))

    def reject_question(self, question_id: str) -> None:
        self._loop.run(self._inner.reject_question(question_id))

    def events(self, offset: int = 0, *, include_raw: bool = False) -> List[UniversalEvent]:
        return self._loop.run(self._inner.events(offset, include_raw=include_raw))


class Client:
    """The blocking client of one `agent-api serve`.

    ```python
    with Client("http://127.0.0.1:2468", token=TOKEN) as api:
        session = api.create_session(agent="scripted")
        print(session.send("Say hello", on_permission=lambda p: "once").text)
    ```
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:2468",
        *,
        token: Optional[str] = None,
        timeout: float = 30.0,
        reconnect_timeout: float = 60.0,
    ) -> None:
        self._loop = _Loop()

        async def make() -> AsyncClient:
            return AsyncClient(base_url, token=token, timeout=timeout, reconnect_timeout=reconnect_timeout)

        self._inner = self._loop.run(make())

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._loop.run(self._inner.aclose())
        self._loop.close()

    def request(self, method: str, path: str, *, json: Optional[Any] = None) -> Any:
        return self._loop.run(self._inner.request(method, path, json=json))

    def health(self) -> Dict[str, Any]:
        return self._loop.run(self._inner.health())

    def agents(self) -> List[AgentInfo]:
        return self._loop.run(self._inner.agents())

    def sessions(self) -> List[SessionInfo]:
        return self._loop.run(self._inner.sessions())

    def session(self, session_id: str) -> Session:
        return Session(self._inner.session(session_id), self._loop)

    def create_session(
        self,
        session_id: Optional[str] = None,
        *,
        agent: str,
        options: Optional[Dict[str, Any]] = None,
        **settings: Any,
    ) -> Session:
        inner = self._loop.run(
            self._inner.create_session(session_id, agent=agent, options=options, **settings)
        )
        return Session(inner, self._loop)

    def history(self, agent: str, *, cwd: Optional[str] = None) -> List[StoredSessionInfo]:
        return self._loop.run(self._inner.history(agent, cwd=cwd))

    def history_events(self, agent: str, native_session_id: str) -> List[UniversalEvent]:
        return self._loop.run(self._inner.history_events(agent, native_session_id))
