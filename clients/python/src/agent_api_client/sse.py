"""Server-Sent Events, read from a byte stream: each frame's `id` and its `data` lines joined."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, List, Optional


@dataclass
class Frame:
    """One SSE frame with data."""

    id: Optional[str]
    event: Optional[str]
    data: str


async def frames(lines: AsyncIterator[str]) -> AsyncIterator[Frame]:
    """The frames of a stream of lines (keep-alive comments skipped)."""
    event_id: Optional[str] = None
    event: Optional[str] = None
    data: List[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if line == "":
            if data:
                yield Frame(event_id, event, "\n".join(data))
            event_id, event, data = None, None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "id":
                event_id = value
            elif name == "event":
                event = value
            elif name == "data":
                data.append(value)
