"""Typed models of the server's bodies (`/v1/openapi.json`) and of the universal events
(`spec/universal-schema.json`), as `TypedDict`s: what the server sends is kept as it came (plain
JSON), with types for the checker. `tests/test_models.py` checks every field here against both
documents, so the models cannot drift from the server.

Fields the server may omit are `NotRequired`; JSON `null` is `None`.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover - older interpreters
    from typing_extensions import NotRequired

# --- The universal events (spec/universal-schema.json) -----------------------------------------

EventType = Literal[
    "session.started",
    "session.ended",
    "item.started",
    "item.delta",
    "item.completed",
    "error",
    "permission.requested",
    "permission.resolved",
    "question.requested",
    "question.resolved",
    "agent.unparsed",
]
EventSource = Literal["agent", "daemon"]
ItemKind = Literal["message", "tool_call", "tool_result", "system", "status", "unknown"]
ItemRole = Literal["user", "assistant", "system", "tool"]
ItemStatus = Literal["in_progress", "completed", "failed"]
PermissionStatus = Literal["requested", "approved", "denied"]
QuestionStatus = Literal["requested", "answered", "rejected"]


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class JsonPart(TypedDict):
    type: Literal["json"]
    json: Any


class ToolCallPart(TypedDict):
    type: Literal["tool_call"]
    name: str
    arguments: str
    call_id: str


class ToolResultPart(TypedDict):
    type: Literal["tool_result"]
    call_id: str
    output: str


class FileRefPart(TypedDict):
    type: Literal["file_ref"]
    path: str
    action: str
    diff: NotRequired[Optional[str]]


class ReasoningPart(TypedDict):
    """Reasoning: part of an assistant message item, never its answer."""

    type: Literal["reasoning"]
    text: str
    visibility: str


class ImagePart(TypedDict):
    type: Literal["image"]
    path: str
    mime: NotRequired[Optional[str]]


class StatusPart(TypedDict):
    """A status: `turn_started`, `turn_completed`, `turn_failed` (detail `turn N`) and others."""

    type: Literal["status"]
    label: str
    detail: NotRequired[Optional[str]]


ContentPart = Union[
    TextPart,
    JsonPart,
    ToolCallPart,
    ToolResultPart,
    FileRefPart,
    ReasoningPart,
    ImagePart,
    StatusPart,
]


class UniversalItem(TypedDict):
    item_id: str
    native_item_id: NotRequired[Optional[str]]
    parent_id: NotRequired[Optional[str]]
    kind: ItemKind
    role: NotRequired[Optional[ItemRole]]
    content: List[ContentPart]
    status: ItemStatus


class SessionStartedData(TypedDict):
    metadata: NotRequired[Any]


class SessionEndedData(TypedDict):
    reason: str
    terminated_by: str


class ItemEventData(TypedDict):
    item: UniversalItem


class ItemDeltaData(TypedDict):
    item_id: str
    native_item_id: NotRequired[Optional[str]]
    delta: str


class ErrorData(TypedDict):
    message: str
    code: NotRequired[Optional[str]]
    details: NotRequired[Any]


class PermissionEventData(TypedDict):
    """A permission the agent asks (`status: requested`) or its resolution."""

    permission_id: str
    action: str
    status: PermissionStatus
    metadata: NotRequired[Any]
    call_id: NotRequired[Optional[str]]
    category: NotRequired[Optional[str]]
    command: NotRequired[Optional[str]]
    command_bytes: NotRequired[Optional[int]]
    cwd: NotRequired[Optional[str]]
    file: NotRequired[Optional[str]]
    diff: NotRequired[Optional[str]]
    reason: NotRequired[Optional[str]]
    tool_name: NotRequired[Optional[str]]


class QuestionEventData(TypedDict):
    """A question the agent asks (`status: requested`) or its resolution."""

    question_id: str
    prompt: str
    options: List[str]
    status: QuestionStatus
    response: NotRequired[Optional[str]]
    call_id: NotRequired[Optional[str]]


class AgentUnparsedData(TypedDict):
    error: str
    location: str
    raw_hash: NotRequired[Optional[str]]


EventData = Union[
    SessionStartedData,
    SessionEndedData,
    ItemEventData,
    ItemDeltaData,
    ErrorData,
    PermissionEventData,
    QuestionEventData,
    AgentUnparsedData,
]


class UniversalEvent(TypedDict):
    """One event of a session's transcript: `sequence` from 1 with no gap."""

    event_id: str
    sequence: int
    time: str
    session_id: str
    native_session_id: NotRequired[Optional[str]]
    synthetic: bool
    source: EventSource
    type: EventType
    data: Any
    raw: NotRequired[Any]


# --- The server's bodies (/v1/openapi.json) ------------------------------------------------------


class ProblemDetails(TypedDict):
    type: str
    title: str
    status: int
    detail: NotRequired[Optional[str]]
    instance: NotRequired[Optional[str]]


class SessionUsage(TypedDict):
    turns: int
    inputTokens: NotRequired[int]
    cachedInputTokens: NotRequired[int]
    outputTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]
    costUsd: NotRequired[float]


class SessionInfo(TypedDict):
    sessionId: str
    agent: str
    agentMode: str
    permissionMode: str
    ended: bool
    eventCount: int
    model: NotRequired[Optional[str]]
    variant: NotRequired[Optional[str]]
    nativeSessionId: NotRequired[Optional[str]]
    endError: NotRequired[str]
    live: NotRequired[bool]
    usage: NotRequired[SessionUsage]
    state: NotRequired[str]
    owner: NotRequired[str]
    resumedHow: NotRequired[str]
    snapshotTurn: NotRequired[int]
    queued: NotRequired[int]


class SessionListResponse(TypedDict):
    sessions: List[SessionInfo]


class CreateSessionResponse(TypedDict):
    healthy: bool
    error: NotRequired[Any]
    nativeSessionId: NotRequired[Optional[str]]


class SessionSettings(TypedDict, total=False):
    """The options of a session (`CreateSessionRequest` without `agent`)."""

    agentMode: Optional[str]
    permissionMode: Optional[str]
    model: Optional[str]
    variant: Optional[str]
    agentVersion: Optional[str]
    options: Optional[Dict[str, Any]]
    systemPrompt: Optional[str]
    appendSystemPrompt: Optional[str]
    turnTimeoutSecs: Optional[int]
    maxTurns: Optional[int]
    maxTokens: Optional[int]
    maxCostUsd: Optional[float]
    startupTimeoutSecs: Optional[int]
    idleTimeoutSecs: Optional[int]
    outputSchema: Optional[Any]
    allowedTools: Optional[List[str]]
    deniedTools: Optional[List[str]]
    resume: Optional[str]
    fork: Optional[str]


class ImageInput(TypedDict, total=False):
    """An image of a message: `path` (beneath the session's working directory) or `data` (base64)
    with its `mediaType`."""

    path: Optional[str]
    data: Optional[str]
    mediaType: Optional[str]


class TurnError(TypedDict):
    code: str
    message: str


class PendingRequest(TypedDict):
    kind: str
    id: str
    sequence: int


class TurnOutcome(TypedDict):
    """`POST …/messages?wait=true` and `GET …/turns/{n}`."""

    sessionId: str
    turn: Optional[int]
    status: str
    finalText: NotRequired[str]
    usage: NotRequired[SessionUsage]
    error: NotRequired[TurnError]
    firstSequence: NotRequired[int]
    lastSequence: NotRequired[int]
    pending: NotRequired[PendingRequest]


class AgentInfo(TypedDict):
    id: str
    installed: bool
    version: NotRequired[Optional[str]]
    path: NotRequired[Optional[str]]
    capabilities: Dict[str, bool]
    serverStatus: NotRequired[Any]
    capabilityIds: NotRequired[List[str]]
    needsOption: NotRequired[str]
    reason: NotRequired[str]


class AgentListResponse(TypedDict):
    agents: List[AgentInfo]


class StoredSessionInfo(TypedDict):
    id: str
    time: NotRequired[Optional[str]]
    cwd: NotRequired[Optional[str]]
    firstPrompt: NotRequired[Optional[str]]
    title: NotRequired[Optional[str]]
    size: NotRequired[Optional[int]]


class StoredSessionListResponse(TypedDict):
    sessions: List[StoredSessionInfo]


class EventsResponse(TypedDict):
    events: List[UniversalEvent]
    hasMore: bool


#: The models checked against `/v1/openapi.json` by the tests: schema name → TypedDict.
OPENAPI_MODELS: Dict[str, Any] = {
    "ProblemDetails": ProblemDetails,
    "SessionUsage": SessionUsage,
    "SessionInfo": SessionInfo,
    "SessionListResponse": SessionListResponse,
    "CreateSessionResponse": CreateSessionResponse,
    "SessionSettings": SessionSettings,
    "ImageInput": ImageInput,
    "TurnError": TurnError,
    "PendingRequest": PendingRequest,
    "TurnOutcome": TurnOutcome,
    "AgentInfo": AgentInfo,
    "AgentListResponse": AgentListResponse,
    "StoredSessionInfo": StoredSessionInfo,
    "StoredSessionListResponse": StoredSessionListResponse,
    "EventsResponse": EventsResponse,
}

#: The models checked against `spec/universal-schema.json`: definition name → TypedDict.
UNIVERSAL_MODELS: Dict[str, Any] = {
    "UniversalItem": UniversalItem,
    "SessionStartedData": SessionStartedData,
    "SessionEndedData": SessionEndedData,
    "ItemEventData": ItemEventData,
    "ItemDeltaData": ItemDeltaData,
    "ErrorData": ErrorData,
    "PermissionEventData": PermissionEventData,
    "QuestionEventData": QuestionEventData,
    "AgentUnparsedData": AgentUnparsedData,
}

#: The content parts, by their `type`.
CONTENT_PARTS: Dict[str, Any] = {
    "text": TextPart,
    "json": JsonPart,
    "tool_call": ToolCallPart,
    "tool_result": ToolResultPart,
    "file_ref": FileRefPart,
    "reasoning": ReasoningPart,
    "image": ImagePart,
    "status": StatusPart,
}
