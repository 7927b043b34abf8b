/** The client of `agent-api serve` (`spec/http-api.md`), on `fetch` and web streams. */

import { ApiError, ConnectionLost, fromProblem } from "./errors.js";
import type {
  AgentInfo,
  ErrorData,
  ImageInput,
  PermissionEventData,
  QuestionEventData,
  SessionInfo,
  SessionSettings,
  SessionUsage,
  StoredSessionInfo,
  TurnOutcome,
  UniversalEvent,
  UniversalItem,
} from "./models.js";
import { frames } from "./sse.js";
import { AnswerText } from "./text.js";

/** What a permission callback answers: `"once"`, `"always"`, `"reject"`, `true` (once), `false`
 * (reject), or `undefined` to leave the request waiting (answered some other way). */
export type PermissionReply = "once" | "always" | "reject" | boolean | undefined;
/** What a question callback answers: the chosen answers, or `undefined` to reject it. */
export type QuestionReply = string[] | undefined;
export type PermissionCallback = (request: PermissionEventData) => PermissionReply | Promise<PermissionReply>;
export type QuestionCallback = (question: QuestionEventData) => QuestionReply | Promise<QuestionReply>;

export interface SendOptions {
  /** Called as the turn asks a permission; its answer is sent. */
  onPermission?: PermissionCallback;
  /** Called as the turn asks a question; its answer is sent. */
  onQuestion?: QuestionCallback;
  /** Called for each event of the turn (`send` only). */
  onEvent?: (event: UniversalEvent) => void | Promise<void>;
  images?: ImageInput[];
  agentMode?: string;
}

/** How a turn ended. */
export interface TurnResult {
  sessionId: string;
  /** The turn's number in the session. */
  turn: number | undefined;
  /** `completed`, `failed`, `cancelled` (`ended` when the session ended with it). */
  status: string;
  /** The final answer: the last assistant message's text (as `TurnOutcome.finalText`), reasoning excluded. */
  text: string;
  reasoning: string;
  usage: SessionUsage | undefined;
  /** The terminal error of a turn that did not complete. */
  error: ErrorData | undefined;
  /** Every event of the turn, in order, each once. */
  events: UniversalEvent[];
}

export interface ClientOptions {
  /** The bearer token. */
  token?: string;
  /** How long a stream tries to come back after its connection broke (ms; default 60 000). */
  reconnectTimeoutMs?: number;
  /** Another `fetch` (default: the global one). */
  fetch?: typeof fetch;
}

/** The session's delimiter of turn `n` an event is, if it is one (a daemon status item). */
export function turnBoundary(event: UniversalEvent): ["turn_started" | "turn_completed" | "turn_failed", number] | undefined {
  if (event.type !== "item.completed" || event.source !== "daemon") return undefined;
  const item = (event.data as { item?: UniversalItem }).item;
  for (const part of item?.content ?? []) {
    if (part.type !== "status") continue;
    if (part.label !== "turn_started" && part.label !== "turn_completed" && part.label !== "turn_failed") continue;
    const match = /^turn (\d+)$/.exec(part.detail ?? "");
    if (match) return [part.label, Number(match[1])];
  }
  return undefined;
}

const segment = (s: string) => encodeURIComponent(s);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The events of one turn as they come (`for await`), then its {@link TurnResult} (`result()`). */
export class TurnStream implements AsyncIterable<UniversalEvent> {
  private done: TurnResult | undefined;
  private started = false;

  constructor(
    private readonly session: Session,
    private readonly body: Record<string, unknown>,
    private readonly options: SendOptions,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<UniversalEvent> {
    if (this.started) throw new Error("a turn's stream is read once");
    this.started = true;
    return this.events();
  }

  /** How the turn ended (reads the rest of its events first). */
  async result(): Promise<TurnResult> {
    if (!this.started) for await (const _ of this) { /* read to the end */ }
    if (!this.done) throw new Error("the turn's stream was not read to its end");
    return this.done;
  }

  private async *events(): AsyncGenerator<UniversalEvent> {
    const session = this.session;
    const api = session.api;
    let last = (await session.info()).eventCount;
    let turn: number | undefined;
    let closing: string | undefined;
    const events: UniversalEvent[] = [];
    const text = new AnswerText();
    const answered = new Set<string>();
    const take = (event: UniversalEvent): boolean => {
      const boundary = turnBoundary(event);
      if (boundary && boundary[0] === "turn_started" && turn === undefined) turn = boundary[1];
      events.push(event);
      text.feed(event);
      if (event.type === "session.ended") {
        closing ??= "ended";
        return true;
      }
      if (boundary && boundary[1] === turn && boundary[0] !== "turn_started") {
        closing = boundary[0] === "turn_completed" ? "completed" : "failed";
        return closing === "completed"; // a failed turn's terminal error follows
      }
      return closing === "failed" && event.type === "error";
    };
    let body: ReadableStream<Uint8Array> | undefined = await api.openStream(
      "POST", `/v1/sessions/${segment(session.id)}/messages/stream`, this.body);
    let ended = false;
    while (!ended) {
      body ??= await api.reconnect(session, last);
      try {
        for await (const frame of frames(body)) {
          if (frame.id === undefined) continue;
          const sequence = Number(frame.id);
          if (sequence <= last) continue; // already seen: never twice
          last = sequence;
          const event = JSON.parse(frame.data) as UniversalEvent;
          const boundary = turnBoundary(event);
          // On the session's stream, another turn's events are not this one's.
          if (turn !== undefined && boundary && boundary[1] !== turn) continue;
          const end = take(event);
          yield event;
          await this.answer(event, answered);
          if (end) {
            ended = true;
            break;
          }
        }
      } catch (error) {
        if (error instanceof ApiError) throw error;
        // The connection broke: resumed from the last sequence below.
      }
      body = undefined;
    }
    let outcome: TurnOutcome | undefined;
    if (turn !== undefined) {
      try {
        outcome = await session.outcome(turn);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error; // not kept (a restarted server)
      }
    }
    const failure = [...events].reverse().find((e) => e.type === "error")?.data as ErrorData | undefined;
    let status = closing ?? "failed";
    if (status === "failed" && failure?.code === "cancelled") status = "cancelled";
    if (outcome && ["completed", "failed", "cancelled"].includes(outcome.status)) status = outcome.status;
    this.done = {
      sessionId: session.id,
      turn,
      status,
      text: status === "completed" && outcome?.finalText !== undefined ? outcome.finalText : text.final,
      reasoning: text.reasoning,
      usage: outcome?.usage,
      error: status === "completed" ? undefined : failure,
      events,
    };
  }

  private async answer(event: UniversalEvent, answered: Set<string>): Promise<void> {
    if (event.type === "permission.requested" && this.options.onPermission) {
      const request = event.data as PermissionEventData;
      if (answered.has(request.permission_id)) return;
      answered.add(request.permission_id);
      const reply = await this.options.onPermission(request);
      if (reply === undefined) return;
      const word = reply === true ? "once" : reply === false ? "reject" : reply;
      await this.session.replyPermission(request.permission_id, word);
    } else if (event.type === "question.requested" && this.options.onQuestion) {
      const question = event.data as QuestionEventData;
      if (answered.has(question.question_id)) return;
      answered.add(question.question_id);
      const answers = await this.options.onQuestion(question);
      if (answers === undefined) await this.session.rejectQuestion(question.question_id);
      else await this.session.replyQuestion(question.question_id, answers);
    }
  }
}

/** A session of the server, by id. */
export class Session {
  constructor(readonly api: AgentApiClient, readonly id: string) {}

  private path(rest = ""): string {
    return `/v1/sessions/${segment(this.id)}${rest}`;
  }

  /** `GET /v1/sessions/{id}`. */
  info(): Promise<SessionInfo> {
    return this.api.request("GET", this.path()) as Promise<SessionInfo>;
  }

  /**
   * Sends `message` and streams its turn's events (a message sent while another turn runs waits
   * in the session's queue, then streams). The stream survives a broken connection or a restarted
   * server: it resumes from the last event it got (`Last-Event-ID`), with no gap and no duplicate,
   * bringing a `resumable` session back first. Callbacks are called as the turn asks.
   */
  stream(message: string, options: SendOptions = {}): TurnStream {
    const body: Record<string, unknown> = { message };
    if (options.images) body.images = options.images;
    if (options.agentMode) body.agentMode = options.agentMode;
    return new TurnStream(this, body, options);
  }

  /** Sends `message`, follows its turn (calling `onEvent` for each event) and resolves with how it ended. */
  async send(message: string, options: SendOptions = {}): Promise<TurnResult> {
    const stream = this.stream(message, options);
    for await (const event of stream) await options.onEvent?.(event);
    return stream.result();
  }

  /** `POST …/messages?wait=true`: the turn's outcome in one request. */
  sendAndWait(message: string, timeoutSecs?: number): Promise<TurnOutcome> {
    const query = timeoutSecs === undefined ? "" : `&timeout=${timeoutSecs}`;
    return this.api.request("POST", this.path(`/messages?wait=true${query}`), { message }) as Promise<TurnOutcome>;
  }

  /** `POST …/messages`: sends `message` (queued while a turn runs) and resolves at once. */
  async post(message: string): Promise<void> {
    await this.api.request("POST", this.path("/messages"), { message });
  }

  /** `GET …/turns/{turn}`: where the turn is, or how it ended. */
  outcome(turn: number, wait = false, timeoutSecs?: number): Promise<TurnOutcome> {
    const query = [wait ? "wait=true" : "", timeoutSecs === undefined ? "" : `timeout=${timeoutSecs}`].filter(Boolean).join("&");
    return this.api.request("GET", this.path(`/turns/${turn}${query ? `?${query}` : ""}`)) as Promise<TurnOutcome>;
  }

  /** Cancels the turn in progress; the messages queued behind it are dropped. */
  async cancel(): Promise<void> { await this.api.request("POST", this.path("/cancel")); }

  /** Adds `message` to the turn in progress, where the agent can be steered. */
  async steer(message: string, images?: ImageInput[]): Promise<void> {
    await this.api.request("POST", this.path("/steer"), images ? { message, images } : { message });
  }

  /** Ends the session. */
  async terminate(): Promise<void> { await this.api.request("POST", this.path("/terminate")); }

  /** Brings a `resumable` session back (a turn its server died in is closed as interrupted). */
  resume(): Promise<SessionInfo> { return this.api.request("POST", this.path("/resume")) as Promise<SessionInfo>; }

  async replyPermission(permissionId: string, reply: "once" | "always" | "reject"): Promise<void> {
    await this.api.request("POST", this.path(`/permissions/${segment(permissionId)}/reply`), { reply });
  }

  async replyQuestion(questionId: string, answers: string[]): Promise<void> {
    await this.api.request("POST", this.path(`/questions/${segment(questionId)}/reply`), { answers: [answers] });
  }

  async rejectQuestion(questionId: string): Promise<void> {
    await this.api.request("POST", this.path(`/questions/${segment(questionId)}/reject`));
  }

  /** Every stored event after `offset`, read by pages. */
  events(offset = 0): Promise<UniversalEvent[]> {
    return this.api.pages(this.path("/events"), offset);
  }

  /** The session's events after `offset`, then the live ones, until it ends; resumed after a
   * broken connection or a restarted server. */
  async *follow(offset = 0): AsyncGenerator<UniversalEvent> {
    let last = offset;
    for (;;) {
      const body = await this.api.reconnect(this, last);
      try {
        for await (const frame of frames(body)) {
          if (frame.id === undefined || Number(frame.id) <= last) continue;
          last = Number(frame.id);
          yield JSON.parse(frame.data) as UniversalEvent;
        }
        if ((await this.info()).ended) return;
      } catch (error) {
        if (error instanceof ApiError) throw error;
      }
    }
  }
}

/**
 * A client of one `agent-api serve`.
 *
 * ```ts
 * const api = new AgentApiClient("http://127.0.0.1:2468", { token });
 * const session = await api.createSession({ agent: "scripted" });
 * const result = await session.send("Say hello", { onPermission: () => "once" });
 * console.log(result.text);
 * ```
 */
export class AgentApiClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly reconnectTimeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(baseUrl = "http://127.0.0.1:2468", options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.reconnectTimeoutMs = options.reconnectTimeoutMs ?? 60_000;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  private headers(json: boolean, extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { ...extra };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (json) headers["content-type"] = "application/json";
    return headers;
  }

  private async fetchOrLost(method: string, path: string, body: unknown, extra?: Record<string, string>): Promise<Response> {
    try {
      return await this.fetch(this.baseUrl + path, {
        method,
        headers: this.headers(body !== undefined, extra),
        body: body === undefined ? null : JSON.stringify(body),
      });
    } catch (error) {
      throw new ConnectionLost(`${method} ${path}: ${String((error as Error)?.cause ?? error)}`);
    }
  }

  /** One request; its JSON body (`undefined` when empty). Throws the `ApiError` of a problem. */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await this.fetchOrLost(method, path, body);
    const text = await response.text().catch((error: unknown) => {
      throw new ConnectionLost(`${method} ${path}: ${String(error)}`);
    });
    const parsed: unknown = text ? JSON.parse(text) : undefined;
    if (!response.ok) throw fromProblem(response.status, parsed);
    return parsed;
  }

  health(): Promise<{ status: string }> { return this.request("GET", "/v1/health") as Promise<{ status: string }>; }

  async agents(): Promise<AgentInfo[]> {
    return ((await this.request("GET", "/v1/agents")) as { agents: AgentInfo[] }).agents;
  }

  async sessions(): Promise<SessionInfo[]> {
    return ((await this.request("GET", "/v1/sessions")) as { sessions: SessionInfo[] }).sessions;
  }

  /** The session `id` (no request is sent). */
  session(id: string): Session { return new Session(this, id); }

  /** Creates a session (a random id when none is given). */
  async createSession(request: SessionSettings & { agent: string; id?: string }): Promise<Session> {
    const { id, ...body } = request;
    const sessionId = id ?? `ts-${Math.random().toString(16).slice(2, 14)}`;
    await this.request("POST", `/v1/sessions/${segment(sessionId)}`, body);
    return new Session(this, sessionId);
  }

  /** The agent's own stored sessions. */
  async history(agent: string, cwd?: string): Promise<StoredSessionInfo[]> {
    const query = cwd ? `?cwd=${encodeURIComponent(cwd)}` : "";
    return ((await this.request("GET", `/v1/agents/${segment(agent)}/history${query}`)) as { sessions: StoredSessionInfo[] }).sessions;
  }

  /** One of the agent's stored sessions, read back as universal events. */
  historyEvents(agent: string, nativeSessionId: string): Promise<UniversalEvent[]> {
    return this.pages(`/v1/agents/${segment(agent)}/history/${segment(nativeSessionId)}/events`, 0);
  }

  /** @internal Every event of a paged endpoint after `offset`. */
  async pages(path: string, offset: number): Promise<UniversalEvent[]> {
    const events: UniversalEvent[] = [];
    for (;;) {
      const page = (await this.request("GET", `${path}?offset=${offset}`)) as { events: UniversalEvent[]; hasMore: boolean };
      events.push(...page.events);
      const last = page.events.at(-1);
      if (!page.hasMore || !last) return events;
      offset = last.sequence;
    }
  }

  /** @internal An SSE response's body; throws the typed error of a refusal. */
  async openStream(method: string, path: string, body?: unknown, extra?: Record<string, string>): Promise<ReadableStream<Uint8Array>> {
    const response = await this.fetchOrLost(method, path, body, extra);
    if (!response.ok) {
      const text = await response.text().catch(() => "");
      let parsed: unknown;
      try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
      throw fromProblem(response.status, parsed);
    }
    if (!response.body) throw new ConnectionLost(`${method} ${path}: no body`);
    return response.body;
  }

  /** @internal The session's SSE after `last`, tried again while the server is away; a
   * `resumable` session is brought back first, so that a turn its server died in is closed. */
  async reconnect(session: Session, last: number): Promise<ReadableStream<Uint8Array>> {
    const deadline = Date.now() + this.reconnectTimeoutMs;
    let pause = 50;
    for (;;) {
      try {
        const info = await session.info();
        if (info.state === "resumable") await session.resume();
        return await this.openStream("GET", `/v1/sessions/${segment(session.id)}/events/sse`, undefined,
          { "last-event-id": String(last) });
      } catch (error) {
        const retry = error instanceof ConnectionLost
          || (error instanceof ApiError && [409, 500, 502, 503].includes(error.status));
        if (!retry || Date.now() + pause > deadline) {
          if (error instanceof ConnectionLost) {
            throw new ConnectionLost(`session ${session.id}: the server did not come back within ${this.reconnectTimeoutMs} ms: ${error.message}`);
          }
          throw error;
        }
      }
      await sleep(pause);
      pause = Math.min(pause * 2, 1000);
    }
  }
}
