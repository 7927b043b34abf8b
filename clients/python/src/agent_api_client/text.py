"""Telling the answer from the reasoning.

A reasoning item is an assistant message too (`kind: "message"`, `role: "assistant"`): what tells
them apart is its content parts. The answer is the `text` parts of the assistant's message items;
the reasoning is their `reasoning` parts. While an item streams, its `item.delta`s carry no part
type: a delta belongs to the reasoning when its item started with a `reasoning` part.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple

Kind = Literal["answer", "reasoning"]


def _assistant_message(item: Mapping[str, Any]) -> bool:
    return item.get("kind") == "message" and item.get("role") == "assistant"


def is_reasoning_item(item: Mapping[str, Any]) -> bool:
    """Whether `item` is an assistant's reasoning (an assistant message holding reasoning parts)."""
    return _assistant_message(item) and any(
        part.get("type") == "reasoning" for part in item.get("content") or []
    )


def _parts_text(item: Mapping[str, Any], part_type: str) -> str:
    """The text of an assistant message item's parts of `part_type` ('' for any other item)."""
    if not _assistant_message(item):
        return ""
    return "".join(
        str(part.get("text") or "")
        for part in item.get("content") or []
        if part.get("type") == part_type
    )


def answer_of(item: Mapping[str, Any]) -> str:
    """The answer text of an assistant message item (its `text` parts; '' for any other item)."""
    return _parts_text(item, "text")


def reasoning_of(item: Mapping[str, Any]) -> str:
    """The reasoning text of an assistant message item (its `reasoning` parts)."""
    return _parts_text(item, "reasoning")


class AnswerText:
    """Follows a turn's events and keeps its answer and its reasoning apart.

    >>> text = AnswerText()
    >>> for event in events:            # doctest: +SKIP
    ...     piece = text.feed(event)
    ...     if piece and piece[0] == "answer":
    ...         print(piece[1], end="")
    >>> text.answer                     # doctest: +SKIP
    'the whole answer'
    """

    def __init__(self) -> None:
        self._kinds: Dict[str, Kind] = {}
        self._streamed: Dict[str, List[str]] = {}
        self._completed: Dict[str, Tuple[str, str]] = {}
        self._order: List[str] = []

    def feed(self, event: Mapping[str, Any]) -> Optional[Tuple[Kind, str]]:
        """Takes the next event; returns `("answer" | "reasoning", text)` for a piece of either."""
        kind = event.get("type")
        data = event.get("data") or {}
        if kind in ("item.started", "item.completed"):
            item = data.get("item") or {}
            if not _assistant_message(item):
                return None
            item_id = str(item.get("item_id"))
            if item_id not in self._kinds:
                self._order.append(item_id)
            self._kinds[item_id] = "reasoning" if is_reasoning_item(item) else "answer"
            if kind == "item.completed":
                self._completed[item_id] = (answer_of(item), reasoning_of(item))
            return None
        if kind == "item.delta":
            item_id = str(data.get("item_id"))
            item_kind = self._kinds.get(item_id)
            if item_kind is None:
                return None
            delta = str(data.get("delta") or "")
            self._streamed.setdefault(item_id, []).append(delta)
            return (item_kind, delta)
        return None

    def _text(self, kind: Kind) -> str:
        pieces = []
        for item_id in self._order:
            if item_id in self._completed:
                answer, reasoning = self._completed[item_id]
                pieces.append(answer if kind == "answer" else reasoning)
            elif self._kinds.get(item_id) == kind:
                pieces.append("".join(self._streamed.get(item_id, [])))
        return "".join(pieces)

    @property
    def answer(self) -> str:
        """The answer so far: every assistant message's text, reasoning excluded."""
        return self._text("answer")

    @property
    def final(self) -> str:
        """The last assistant message's text (a turn's final answer, as `TurnOutcome.finalText`)."""
        for item_id in reversed(self._order):
            if self._kinds.get(item_id) != "answer":
                continue
            if item_id in self._completed:
                return self._completed[item_id][0]
            return "".join(self._streamed.get(item_id, []))
        return ""

    @property
    def reasoning(self) -> str:
        """The reasoning so far."""
        return self._text("reasoning")
