/**
 * A typed client of `agent-api serve` (the universal session API over HTTP and SSE): sessions,
 * streamed turns resolving with their outcome, permission and question callbacks, cancel, steer,
 * history, typed errors from the server's ProblemDetails, the answer told from the reasoning.
 */

export { AgentApiClient, Session, TurnStream, turnBoundary } from "./client.js";
export type {
  ClientOptions, PermissionCallback, PermissionReply, QuestionCallback, QuestionReply, SendOptions, TurnResult,
} from "./client.js";
export {
  AgentApiError, ApiError, BadRequest, Conflict, ConnectionLost, Forbidden, NotFound, ServerError, TooManyRequests,
  Unauthorized, fromProblem,
} from "./errors.js";
export { AnswerText, answerOf, isReasoningItem, reasoningOf } from "./text.js";
export type { Piece } from "./text.js";
export { frames } from "./sse.js";
export type { Frame } from "./sse.js";
export * from "./models.js";
export const VERSION = "0.1.0";
