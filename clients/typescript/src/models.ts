/**
 * Typed models of the server's bodies (`/v1/openapi.json`) and of the universal events
 * (`spec/universal-schema.json`). Each model's field names are also listed at run time in
 * {@link FIELDS}, and the compiler proves each list is exactly its interface's keys: the tests
 * compare the lists with both documents, so the models cannot drift from the server.
 */

// --- The universal events ---------------------------------------------------------------------

export const EVENT_TYPES = [
  "session.started", "session.ended", "item.started", "item.delta", "item.completed", "error",
  "permission.requested", "permission.resolved", "question.requested", "question.resolved",
  "agent.unparsed",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
export const EVENT_SOURCES = ["agent", "daemon"] as const;
export type EventSource = (typeof EVENT_SOURCES)[number];
export const ITEM_KINDS = ["message", "tool_call", "tool_result", "system", "status", "unknown"] as const;
export type ItemKind = (typeof ITEM_KINDS)[number];
export const ITEM_ROLES = ["user", "assistant", "system", "tool"] as const;
export type ItemRole = (typeof ITEM_ROLES)[number];
export const ITEM_STATUSES = ["in_progress", "completed", "failed"] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];
export const PERMISSION_STATUSES = ["requested", "approved", "denied"] as const;
export type PermissionStatus = (typeof PERMISSION_STATUSES)[number];
export const QUESTION_STATUSES = ["requested", "answered", "rejected"] as const;
export type QuestionStatus = (typeof QUESTION_STATUSES)[number];

export interface TextPart { type: "text"; text: string }
export interface JsonPart { type: "json"; json: unknown }
export interface ToolCallPart { type: "tool_call"; name: string; arguments: string; call_id: string }
export interface ToolResultPart { type: "tool_result"; call_id: string; output: string }
export interface FileRefPart { type: "file_ref"; path: string; action: string; diff?: string | null }
/** Reasoning: part of an assistant message item, never its answer. */
export interface ReasoningPart { type: "reasoning"; text: string; visibility: string }
export interface ImagePart { type: "image"; path: string; mime?: string | null }
/** A status: `turn_started`, `turn_completed`, `turn_failed` (detail `turn N`) and others. */
export interface StatusPart { type: "status"; label: string; detail?: string | null }
export type ContentPart =
  | TextPart | JsonPart | ToolCallPart | ToolResultPart | FileRefPart | ReasoningPart | ImagePart | StatusPart;

export interface UniversalItem {
  item_id: string;
  native_item_id?: string | null;
  parent_id?: string | null;
  kind: ItemKind;
  role?: ItemRole | null;
  content: ContentPart[];
  status: ItemStatus;
}
export interface SessionStartedData { metadata?: unknown }
export interface SessionEndedData { reason: string; terminated_by: string }
export interface ItemEventData { item: UniversalItem }
export interface ItemDeltaData { item_id: string; native_item_id?: string | null; delta: string }
export interface ErrorData { message: string; code?: string | null; details?: unknown }
export interface PermissionEventData {
  permission_id: string;
  action: string;
  status: PermissionStatus;
  metadata?: unknown;
  call_id?: string | null;
  category?: string | null;
  command?: string | null;
  command_bytes?: number | null;
  cwd?: string | null;
  file?: string | null;
  diff?: string | null;
  reason?: string | null;
  tool_name?: string | null;
}
export interface QuestionEventData {
  question_id: string;
  prompt: string;
  options: string[];
  status: QuestionStatus;
  response?: string | null;
  call_id?: string | null;
}
export interface AgentUnparsedData { error: string; location: string; raw_hash?: string | null }

/** One event of a session's transcript: `sequence` from 1 with no gap. */
export interface UniversalEvent {
  event_id: string;
  sequence: number;
  time: string;
  session_id: string;
  native_session_id?: string | null;
  synthetic: boolean;
  source: EventSource;
  type: EventType;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  data: any;
  raw?: unknown;
}

// --- The server's bodies ---------------------------------------------------------------------

export interface ProblemDetails { type: string; title: string; status: number; detail?: string | null; instance?: string | null }
export interface SessionUsage {
  turns: number;
  inputTokens?: number;
  cachedInputTokens?: number;
  outputTokens?: number;
  reasoningTokens?: number;
  costUsd?: number;
}
export interface SessionInfo {
  sessionId: string;
  agent: string;
  agentMode: string;
  permissionMode: string;
  ended: boolean;
  eventCount: number;
  model?: string | null;
  variant?: string | null;
  nativeSessionId?: string | null;
  endError?: string;
  live?: boolean;
  usage?: SessionUsage;
  state?: string;
  owner?: string;
  resumedHow?: string;
  snapshotTurn?: number;
  queued?: number;
}
export interface SessionListResponse { sessions: SessionInfo[] }
export interface CreateSessionResponse { healthy: boolean; error?: unknown; nativeSessionId?: string | null }
/** The options of a session (`CreateSessionRequest` without `agent`). */
export interface SessionSettings {
  agentMode?: string | null;
  permissionMode?: string | null;
  model?: string | null;
  variant?: string | null;
  agentVersion?: string | null;
  options?: Record<string, unknown> | null;
  systemPrompt?: string | null;
  appendSystemPrompt?: string | null;
  turnTimeoutSecs?: number | null;
  maxTurns?: number | null;
  maxTokens?: number | null;
  maxCostUsd?: number | null;
  startupTimeoutSecs?: number | null;
  idleTimeoutSecs?: number | null;
  outputSchema?: unknown;
  allowedTools?: string[] | null;
  deniedTools?: string[] | null;
  resume?: string | null;
  fork?: string | null;
}
/** An image of a message: `path` (beneath the session's working directory) or `data` (base64). */
export interface ImageInput { path?: string | null; data?: string | null; mediaType?: string | null }
export interface TurnError { code: string; message: string }
export interface PendingRequest { kind: string; id: string; sequence: number }
/** `POST …/messages?wait=true` and `GET …/turns/{n}`. */
export interface TurnOutcome {
  sessionId: string;
  turn: number | null;
  status: string;
  finalText?: string;
  usage?: SessionUsage;
  error?: TurnError;
  firstSequence?: number;
  lastSequence?: number;
  pending?: PendingRequest;
}
export interface AgentInfo {
  id: string;
  installed: boolean;
  version?: string | null;
  path?: string | null;
  capabilities: Record<string, boolean>;
  serverStatus?: unknown;
  capabilityIds?: string[];
  /** The backend option a session must set before this agent can run anything here. */
  needsOption?: string;
  /** Why it cannot run here (`installed: false`), for a person. */
  reason?: string;
}
export interface AgentListResponse { agents: AgentInfo[] }
export interface StoredSessionInfo {
  id: string;
  time?: string | null;
  cwd?: string | null;
  firstPrompt?: string | null;
  title?: string | null;
  size?: number | null;
}
export interface StoredSessionListResponse { sessions: StoredSessionInfo[] }
export interface EventsResponse { events: UniversalEvent[]; hasMore: boolean }

// --- The field lists, proven equal to the interfaces' keys -------------------------------------

type Exactly<List extends readonly string[], T> =
  [List[number]] extends [keyof T] ? ([keyof T] extends [List[number]] ? List : never) : never;
function fields<T>() {
  return <const List extends readonly string[]>(list: Exactly<List, T>): List => list;
}

/** Each body model's fields, by its schema's name in `/v1/openapi.json`. */
export const FIELDS = {
  ProblemDetails: fields<ProblemDetails>()(["type", "title", "status", "detail", "instance"]),
  SessionUsage: fields<SessionUsage>()(["turns", "inputTokens", "cachedInputTokens", "outputTokens", "reasoningTokens", "costUsd"]),
  SessionInfo: fields<SessionInfo>()(["sessionId", "agent", "agentMode", "permissionMode", "ended", "eventCount", "model", "variant",
    "nativeSessionId", "endError", "live", "usage", "state", "owner", "resumedHow", "snapshotTurn", "queued"]),
  SessionListResponse: fields<SessionListResponse>()(["sessions"]),
  CreateSessionResponse: fields<CreateSessionResponse>()(["healthy", "error", "nativeSessionId"]),
  SessionSettings: fields<SessionSettings>()(["agentMode", "permissionMode", "model", "variant", "agentVersion", "options",
    "systemPrompt", "appendSystemPrompt", "turnTimeoutSecs", "maxTurns", "maxTokens", "maxCostUsd", "startupTimeoutSecs",
    "idleTimeoutSecs", "outputSchema", "allowedTools", "deniedTools", "resume", "fork"]),
  ImageInput: fields<ImageInput>()(["path", "data", "mediaType"]),
  TurnError: fields<TurnError>()(["code", "message"]),
  PendingRequest: fields<PendingRequest>()(["kind", "id", "sequence"]),
  TurnOutcome: fields<TurnOutcome>()(["sessionId", "turn", "status", "finalText", "usage", "error", "firstSequence",
    "lastSequence", "pending"]),
  AgentInfo: fields<AgentInfo>()(["id", "installed", "version", "path", "capabilities", "serverStatus", "capabilityIds", "needsOption", "reason"]),
  AgentListResponse: fields<AgentListResponse>()(["agents"]),
  StoredSessionInfo: fields<StoredSessionInfo>()(["id", "time", "cwd", "firstPrompt", "title", "size"]),
  StoredSessionListResponse: fields<StoredSessionListResponse>()(["sessions"]),
  EventsResponse: fields<EventsResponse>()(["events", "hasMore"]),
} as const;

/** Each event model's fields, by its definition's name in `spec/universal-schema.json`. */
export const EVENT_FIELDS = {
  UniversalEvent: fields<UniversalEvent>()(["event_id", "sequence", "time", "session_id", "native_session_id", "synthetic",
    "source", "type", "data", "raw"]),
  UniversalItem: fields<UniversalItem>()(["item_id", "native_item_id", "parent_id", "kind", "role", "content", "status"]),
  SessionStartedData: fields<SessionStartedData>()(["metadata"]),
  SessionEndedData: fields<SessionEndedData>()(["reason", "terminated_by"]),
  ItemEventData: fields<ItemEventData>()(["item"]),
  ItemDeltaData: fields<ItemDeltaData>()(["item_id", "native_item_id", "delta"]),
  ErrorData: fields<ErrorData>()(["message", "code", "details"]),
  PermissionEventData: fields<PermissionEventData>()(["permission_id", "action", "status", "metadata", "call_id", "category",
    "command", "command_bytes", "cwd", "file", "diff", "reason", "tool_name"]),
  QuestionEventData: fields<QuestionEventData>()(["question_id", "prompt", "options", "status", "response", "call_id"]),
  AgentUnparsedData: fields<AgentUnparsedData>()(["error", "location", "raw_hash"]),
} as const;

/** Each content part's fields, by its `type`. */
export const PART_FIELDS = {
  text: fields<TextPart>()(["type", "text"]),
  json: fields<JsonPart>()(["type", "json"]),
  tool_call: fields<ToolCallPart>()(["type", "name", "arguments", "call_id"]),
  tool_result: fields<ToolResultPart>()(["type", "call_id", "output"]),
  file_ref: fields<FileRefPart>()(["type", "path", "action", "diff"]),
  reasoning: fields<ReasoningPart>()(["type", "text", "visibility"]),
  image: fields<ImagePart>()(["type", "path", "mime"]),
  status: fields<StatusPart>()(["type", "label", "detail"]),
} as const;

/** The enumerations, by their definition's name in `spec/universal-schema.json`. */
export const ENUMS = {
  UniversalEventType: EVENT_TYPES,
  EventSource: EVENT_SOURCES,
  ItemKind: ITEM_KINDS,
  ItemRole: ITEM_ROLES,
  ItemStatus: ITEM_STATUSES,
  PermissionStatus: PERMISSION_STATUSES,
  QuestionStatus: QUESTION_STATUSES,
} as const;
