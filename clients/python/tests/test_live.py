"""The client against a real `agent-api serve` running the scripted agent: a streamed turn, a
permission approved by a callback, a question answered, a cancel, a reconnect after the server was
killed mid-stream (no gap, no duplicate), a session resumed after a restart, typed errors."""

from __future__ import annotations

import asyncio
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional

from agent_api_client import (
    AnswerText,
    AsyncClient,
    Client,
    Conflict,
    NotFound,
    TooManyRequests,
    Unauthorized,
    models,
)

from .server import Server


def scripted(scenario: str, delay_ms: int = 0) -> Dict[str, Any]:
    return {"backend.scripted.scenario": scenario, "backend.scripted.delay_ms": delay_ms}


def contiguous(events: List[models.UniversalEvent]) -> None:
    sequences = [e["sequence"] for e in events]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), sequences


class Live(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.server = Server(Path(self.directory.name)).start()
        self.api = AsyncClient(self.server.url, token=self.server.token, reconnect_timeout=60)

    async def asyncTearDown(self) -> None:
        await self.api.aclose()
        self.server.stop()
        self.directory.cleanup()

    async def test_a_streamed_turn_keeps_its_answer_apart_from_its_reasoning(self) -> None:
        session = await self.api.create_session(agent="scripted", options=scripted("reasoning"))
        pieces = AnswerText()
        answer: List[str] = []
        events: List[models.UniversalEvent] = []
        stream = session.stream("Say hello")
        async for event in stream:
            events.append(event)
            piece = pieces.feed(event)
            if piece and piece[0] == "answer":
                answer.append(piece[1])
        result = await stream.result()
        self.assertEqual(result.status, "completed")
        self.assertEqual(result.turn, 1)
        self.assertIn("Say hello", result.text)
        self.assertNotIn("Thinking", result.text)
        self.assertIn("Thinking", result.reasoning)
        self.assertEqual("".join(answer), pieces.answer)
        self.assertEqual(pieces.answer, result.text)
        contiguous(events)
        self.assertEqual(result.events, events)
        # The whole transcript: session.started at creation, then the turn, no gap.
        stored = await session.events()
        self.assertEqual(stored[0]["type"], "session.started")
        self.assertEqual(stored[1:], events)

    async def test_a_permission_is_approved_by_a_callback_and_a_question_answered(self) -> None:
        session = await self.api.create_session(agent="scripted", options=scripted("permission"))
        asked: List[models.PermissionEventData] = []

        def approve(request: models.PermissionEventData) -> str:
            asked.append(request)
            return "once"

        result = await session.send("list the files", on_permission=approve)
        self.assertEqual(result.status, "completed", result)
        self.assertEqual(len(asked), 1)
        self.assertIn("Tool finished.", result.text)
        resolved = [e for e in result.events if e["type"] == "permission.resolved"]
        self.assertEqual(resolved[0]["data"]["status"], "approved")
        contiguous(result.events)

        questions = await self.api.create_session(agent="scripted", options=scripted("question"))

        async def choose(question: models.QuestionEventData) -> List[str]:
            await asyncio.sleep(0)
            return [question["options"][0]]

        answered = await questions.send("ask me", on_question=choose)
        self.assertEqual(answered.status, "completed", answered)
        self.assertIn("You chose", answered.text)

    async def test_cancel_ends_the_turn_cancelled_and_the_session_goes_on(self) -> None:
        session = await self.api.create_session(agent="scripted", options=scripted("slow", 100))
        started = asyncio.Event()

        def seen(event: models.UniversalEvent) -> None:
            if event["type"] == "item.delta":
                started.set()

        turn = asyncio.create_task(session.send("go slowly", on_event=seen))
        await asyncio.wait_for(started.wait(), 30)
        await session.cancel()
        result = await asyncio.wait_for(turn, 30)
        self.assertEqual(result.status, "cancelled", result)
        self.assertEqual((result.error or {}).get("code"), "cancelled")
        info = await session.info()
        self.assertFalse(info["ended"])

    async def test_messages_back_to_back_are_queued_and_wait_true_answers_the_outcome(self) -> None:
        session = await self.api.create_session(agent="scripted", options=scripted("text", 20))
        await session.post("first")
        outcome = await session.send_and_wait("second", timeout=60)
        self.assertEqual(outcome["status"], "completed", outcome)
        self.assertEqual(outcome["turn"], 2)
        self.assertIn("second", outcome.get("finalText", ""))

    async def test_typed_errors_for_401_404_409_and_429(self) -> None:
        wrong = AsyncClient(self.server.url, token="not-the-token")
        try:
            with self.assertRaises(Unauthorized) as refused:
                await wrong.sessions()
            self.assertEqual(refused.exception.kind, "token_invalid")
        finally:
            await wrong.aclose()
        with self.assertRaises(NotFound) as missing:
            await self.api.session("nope").info()
        self.assertEqual(missing.exception.kind, "session_not_found")
        await self.api.create_session("taken", agent="scripted")
        with self.assertRaises(Conflict) as taken:
            await self.api.create_session("taken", agent="scripted")
        self.assertEqual(taken.exception.kind, "session_already_exists")
        session = await self.api.create_session(agent="scripted", options=scripted("slow", 200))
        for n in range(9):  # one running, eight queued: the default bound
            await session.post(f"message {n}")
        with self.assertRaises(TooManyRequests) as full:
            await session.post("one too many")
        self.assertEqual(full.exception.kind, "queue_full")
        await session.cancel()
        await session.terminate()
        with self.assertRaises(Conflict) as ended:
            await session.post("after the end")
        self.assertEqual(ended.exception.kind, "session_ended")

    def blocking(self) -> None:
        """The blocking client, in a thread of the test's own."""
        with Client(self.server.url, token=self.server.token) as api:
            session = api.create_session(agent="scripted", options=scripted("permission"))
            result = session.send("run it", on_permission=lambda request: True)
            assert result.status == "completed", result
            assert "Tool finished." in result.text
            # The events as they come, then the result as the generator's value.
            events: List[models.UniversalEvent] = []
            stream = session.stream("again", on_permission=lambda request: "once")
            while True:
                try:
                    events.append(next(stream))
                except StopIteration as end:
                    again = end.value
                    break
            assert again.status == "completed" and again.turn == 2, again
            assert again.events == events

    async def test_the_blocking_client_streams_a_turn_and_approves_in_a_plain_callback(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.blocking)


class Restarts(unittest.IsolatedAsyncioTestCase):
    """A server restarted on the same SQLite store and address."""

    async def asyncSetUp(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        store = "sqlite:" + str(Path(self.directory.name) / "store.sqlite3")
        self.server = Server(Path(self.directory.name), store=store).start()
        self.api = AsyncClient(self.server.url, token=self.server.token, reconnect_timeout=90)

    async def asyncTearDown(self) -> None:
        await self.api.aclose()
        self.server.stop()
        self.directory.cleanup()

    async def test_a_stream_resumes_after_the_server_is_killed_mid_turn_with_no_gap_and_no_duplicate(self) -> None:
        session = await self.api.create_session(agent="scripted", options=scripted("slow", 100))
        deltas = asyncio.Event()
        count = 0

        def seen(event: models.UniversalEvent) -> None:
            nonlocal count
            if event["type"] == "item.delta":
                count += 1
                if count == 3:
                    deltas.set()

        turn = asyncio.create_task(session.send("a long answer", on_event=seen))
        await asyncio.wait_for(deltas.wait(), 30)
        self.server.kill()
        self.server.start()
        result = await asyncio.wait_for(turn, 120)
        # Its server died under it: the turn is closed as interrupted when the session comes back.
        self.assertEqual(result.status, "failed", result)
        self.assertEqual((result.error or {}).get("code"), "interrupted", result)
        contiguous(result.events)
        stored = await session.events()
        first = result.events[0]["sequence"]
        self.assertEqual(result.events, [e for e in stored if first <= e["sequence"] <= result.events[-1]["sequence"]])
        # The session goes on.
        again = await session.send("and now?")
        self.assertEqual(again.status, "completed", again)

    async def test_a_session_is_resumed_after_its_server_restarts(self) -> None:
        session = await self.api.create_session(agent="scripted", options=scripted("text"))
        first = await session.send("My name is Ada.")
        self.assertEqual(first.status, "completed")
        self.server.stop()
        self.server.start()
        self.assertEqual((await session.info()).get("state"), "resumable")
        info = await session.resume()
        self.assertEqual(info.get("state"), "live")
        second = await session.send("What is my name?")
        self.assertEqual(second.status, "completed", second)
        self.assertEqual(second.turn, 2)
        events = await session.events()
        contiguous(events)
        seams = [e for e in events if e["type"] == "item.completed"
                 and any(p.get("label") == "session_resumed" for p in e["data"]["item"]["content"])]
        self.assertEqual(len(seams), 1, seams)
        self.assertEqual([e["type"] for e in events].count("session.started"), 1)


if __name__ == "__main__":
    unittest.main()
