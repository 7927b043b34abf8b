// One session's transcript on the page: universal events (spec/universal-schema.md) folded into
// rows, one per item (its started, deltas and completed events), permission, question, error and
// session event. Events are queued and applied once per animation frame, a bounded number at a
// time, so that a 10,000-event session loads without freezing the page; rows off screen are not
// laid out (`content-visibility` in style.css). Every agent string goes in as text (text.js).

import { el, block, line, text, bytes, command as shownCommand } from "./text.js";
import { markdown } from "./markdown.js";

/** Events applied per animation frame. */
const PER_FRAME = 2000;
/** The most characters of a tool's output shown in its row (the JSON view has it whole). */
const OUTPUT_SHOWN = 20000;
/** The most characters of a message a row shows until "show all" (a streamed answer of 19 MB
 * laid out whole froze the page: issue 46). */
export const TEXT_SHOWN = 20000;
/** The most characters of a command a row shows until "show all". */
export const COMMAND_SHOWN = 2000;

export class Transcript {
  /**
   * `scroller`: the element that scrolls; `handlers`: { permission(id, reply), answer(id, text),
   * reject(id), events(row) -> Promise<events for the JSON view>, live() -> bool, changed(kind) }.
   */
  constructor(scroller, handlers) {
    this.scroller = scroller;
    this.list = el("div", "rows");
    scroller.append(this.list);
    this.handlers = handlers;
    this.rows = new Map();
    this.itemKeys = new Map();
    this.completed = new Set();
    this.lastSequence = 0;
    this.count = 0;
    this.queue = [];
    this.scheduled = false;
    this.ended = null;
    /** Whether the session's end has come (queued or applied). */
    this.endSeen = false;
    this.pending = new Set();
    /** Rows whose streamed text grew this frame (their "show all" counts are set once a frame). */
    this.grown = new Set();
    /** Whether a turn runs, and since when (ms, the page's clock). */
    this.busySince = null;
    /** What the person did from this page, so the transcript shows it as theirs: "cancel", "terminate". */
    this.mine = new Set();
  }

  /** Queues an event (an event already seen, by sequence, is dropped). */
  push(event) {
    if (typeof event.sequence !== "number" || event.sequence <= this.lastSequence) return;
    this.lastSequence = event.sequence;
    if (event.type === "session.ended") this.endSeen = true;
    this.queue.push(event);
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => this.flush());
    }
  }

  flush() {
    this.scheduled = false;
    const s = this.scroller;
    const stick = s.scrollHeight - s.scrollTop - s.clientHeight < 120;
    const batch = this.queue.splice(0, PER_FRAME);
    const kinds = new Set();
    for (const event of batch) {
      this.count += 1;
      kinds.add(this.apply(event));
    }
    for (const row of this.grown) if (row.delta) row.delta.render();
    this.grown.clear();
    if (stick) s.scrollTop = s.scrollHeight;
    const waiting = this.scrollTo;
    this.scrollTo = null;
    // What the pane holds, for a reader of the page's state (no gap: received = last sequence).
    this.list.dataset.received = String(this.count);
    this.list.dataset.lastSequence = String(this.lastSequence);
    if (this.queue.length > 0) {
      this.scheduled = true;
      requestAnimationFrame(() => this.flush());
    }
    this.handlers.changed(kinds);
    if (waiting) this.reveal(waiting);
  }

  /** Scrolls a waiting request into view, again on the next frame once the rows before it are
   * laid out (their size is only estimated off screen). */
  reveal(row) {
    if (!this.pending.has(row.key)) return;
    row.node.scrollIntoView({ block: "center" });
    requestAnimationFrame(() => { if (this.pending.has(row.key)) row.node.scrollIntoView({ block: "center" }); });
  }

  /** The row key of item `id`: a session brought back runs a new agent process, whose item ids
   * may be those of the items before the seam; an item that starts again after its row completed
   * gets a row of its own, so nothing before is overwritten. */
  itemKey(id, event) {
    let key = this.itemKeys.get(id) || "item:" + id;
    if (this.completed.has(key)) {
      key = "item:" + id + "@" + event.sequence;
      this.itemKeys.set(id, key);
    }
    return key;
  }

  row(key, cls, events) {
    let row = this.rows.get(key);
    if (row) return row;
    const node = el("article", "row " + cls);
    const head = el("header", "row-head");
    const body = el("div", "row-body");
    const toggle = el("button", "json-toggle", "{ }");
    toggle.type = "button";
    toggle.title = "Show this row's events as JSON";
    const json = el("pre", "json");
    json.hidden = true;
    node.append(head, body, json);
    row = { key, node, head, body, json, toggle, events: events || [], delta: null };
    toggle.addEventListener("click", () => this.toggleJson(row));
    this.rows.set(key, row);
    this.list.append(node);
    return row;
  }

  async toggleJson(row) {
    if (!row.json.hidden) {
      row.json.hidden = true;
      row.toggle.classList.remove("on");
      return;
    }
    row.toggle.classList.add("on");
    row.json.hidden = false;
    row.json.textContent = "…";
    let events = row.events;
    try {
      events = await this.handlers.events(row);
    } catch (error) {
      row.json.textContent = text("could not read the raw events: " + error.message);
      return;
    }
    row.json.textContent = text(JSON.stringify(events.length === 1 ? events[0] : events, null, 2));
  }

  heading(row, parts, sequence) {
    row.head.replaceChildren();
    for (const [cls, value] of parts) if (value !== undefined && value !== null && value !== "") row.head.append(el("span", cls, value));
    row.head.append(el("span", "seq", "#" + sequence), row.toggle);
  }

  /** Applies one event; returns its type. */
  apply(event) {
    const d = event.data || {};
    switch (event.type) {
      case "item.started":
      case "item.completed": {
        const item = d.item || {};
        const key = this.itemKey(item.item_id, event);
        const row = this.row(key, "item");
        row.events.push(event);
        this.item(row, item, event);
        if (event.type === "item.completed") this.completed.add(key);
        break;
      }
      case "item.delta": {
        const row = this.row(this.itemKeys.get(d.item_id) || "item:" + d.item_id, "item");
        row.events.push(event);
        if (!row.delta) {
          row.body.replaceChildren();
          row.delta = new Bounded(row.body, TEXT_SHOWN);
          row.node.classList.add("streaming");
        }
        row.delta.append(d.delta);
        this.grown.add(row);
        break;
      }
      case "permission.requested":
      case "permission.resolved":
        this.permission(event, d);
        break;
      case "question.requested":
      case "question.resolved":
        this.question(event, d);
        break;
      case "error": {
        if (d.code === "cancelled") {
          // A cancel is not a failure: neutral, and the person's own when they pressed Cancel.
          const yours = this.mine.has("cancel");
          this.single(event, "mine", [["who", yours ? "you cancelled the turn" : "turn cancelled"]]);
          break;
        }
        const row = this.single(event, "error", [["who", "error"], ["what", d.code]]);
        row.body.append(block("div", "text", d.message));
        if (d.details !== undefined && d.details !== null) row.body.append(details("details", JSON.stringify(d.details, null, 2)));
        break;
      }
      case "session.started":
        this.single(event, "session", [["who", "session started"], ["what", event.native_session_id ? "native id " + event.native_session_id : ""]]);
        break;
      case "session.ended": {
        this.ended = d;
        const exit = d.exit_code !== undefined && d.exit_code !== null ? "exit " + d.exit_code : "";
        const yours = this.mine.has("terminate");
        const row = this.single(event, "session ended reason-" + cssName(d.reason) + (yours ? " mine" : ""),
          [["who", "session ended"], ["what", d.reason], ["by", yours ? "by you" : "by " + (d.terminated_by || "?")], ["exit", exit]]);
        this.busy(null);
        if (d.message) row.body.append(block("div", "text", d.message));
        if (d.stderr && Array.isArray(d.stderr.head)) row.body.append(details("stderr", d.stderr.head.concat(d.stderr.tail || []).join("\n")));
        for (const id of this.pending) this.settle(id);
        break;
      }
      case "agent.unparsed":
        this.single(event, "unparsed", [["who", "unparsed line"], ["what", d.location]]).body.append(block("div", "text", d.error));
        break;
      default:
        this.single(event, "other", [["who", event.type]]);
    }
    return event.type;
  }

  /** The row of an event that stands alone (an error, a session's start or end). */
  single(event, cls, parts) {
    const row = this.row("event:" + event.sequence, cls);
    row.events.push(event);
    this.heading(row, parts, event.sequence);
    return row;
  }

  item(row, item, event) {
    const kind = item.kind || "unknown";
    const role = item.role || "";
    const content = Array.isArray(item.content) ? item.content : [];
    const reasoning = content.some((p) => p.type === "reasoning");
    const yours = item.status === "failed" && this.mine.has("cancel");
    row.node.className = ["row", "item", "kind-" + cssName(kind), role ? "role-" + cssName(role) : "", reasoning ? "reasoning" : "",
      yours ? "mine" : "status-" + cssName(item.status)].join(" ");
    const tool = item.tool || {};
    const call = content.find((p) => p.type === "tool_call");
    let what = kind === "message" ? (reasoning ? "reasoning" : "") : kind.replace("_", " ");
    if (kind === "tool_call" || kind === "tool_result") what += " · " + (tool.tool_name || (call && call.name) || "tool");
    if (kind === "status") what = "";
    const failed = item.status === "failed" ? (this.mine.has("cancel") ? "cut by your cancel" : "failed") : "";
    this.heading(row, [["who", role || kind], ["what", what], ["state", failed]], event.sequence);
    if (event.type === "item.started" && content.length === 0) return;
    if (event.type === "item.started" && row.delta) return;
    // Completed (or started with content): the item's own content replaces the streamed text.
    row.delta = null;
    row.node.classList.remove("streaming");
    row.body.replaceChildren();
    if (kind === "tool_call" || kind === "tool_result") this.tool(row, kind, tool, content);
    else if (kind === "status") this.status(row, content, event);
    else this.parts(row.body, content, role === "assistant");
  }

  tool(row, kind, tool, content) {
    const facts = el("div", "facts");
    if (tool.command) row.body.append(commandBlock(tool.command));
    if (tool.cwd) facts.append(fact("cwd", tool.cwd));
    if (kind === "tool_result") {
      if (tool.exit_code !== undefined && tool.exit_code !== null) {
        const exit = fact("exit", String(tool.exit_code));
        exit.classList.add(tool.exit_code === 0 ? "ok" : "bad");
        facts.append(exit);
      }
      const b = tool.bytes || {};
      const result = content.find((p) => p.type === "tool_result");
      const size = b.stdout ?? b.result ?? (result ? new TextEncoder().encode(result.output).length : undefined);
      if (size !== undefined) facts.append(fact("output", bytes(size)));
      if (b.stderr) facts.append(fact("stderr", bytes(b.stderr)));
    }
    if (facts.childElementCount) row.body.append(facts);
    for (const part of content) {
      if (part.type === "tool_call") {
        if (!tool.command) row.body.append(details("arguments", part.arguments));
      } else if (part.type === "tool_result") {
        const output = String(part.output ?? "");
        if (!output) continue;
        const shown = output.length > OUTPUT_SHOWN ? output.slice(0, OUTPUT_SHOWN) + "\n… (" + bytes(output.length) + " in all: see the JSON)" : output;
        row.body.append(details("output", shown, output.length < 2000));
      } else {
        this.parts(row.body, [part]);
      }
    }
  }

  status(row, content, event) {
    const labels = content.map((p) => (p.type === "status" ? p.label + (p.detail ? ": " + p.detail : "") : p.text || p.type));
    const has = (label) => content.some((p) => p.type === "status" && p.label === label);
    if (has("turn_started") && !row.seen) {
      // A new turn: busy from its start, and a cancel of the last one is no longer news.
      row.seen = true;
      this.busy(Date.parse(event.time) || Date.now());
      this.mine.delete("cancel");
    }
    const cancelled = has("turn_failed") && this.mine.has("cancel");
    row.head.querySelector(".who").textContent = line(cancelled ? "turn cancelled by you" : labels.join(" · ") || "status", 512);
    if (has("turn_completed")) row.node.classList.add("turn-end");
    // The seam of a session brought back after its agent or server went away: shown apart.
    if (has("session_resumed")) row.node.classList.add("seam");
    if (cancelled) row.node.classList.add("mine");
    if (has("turn_completed") || has("turn_failed")) this.busy(null);
    return event;
  }

  /** A turn runs since `since` (ms), or none (null). */
  busy(since) {
    this.busySince = since === null ? null : Math.min(since, Date.now());
  }

  parts(body, content, rich) {
    for (const part of content) {
      switch (part.type) {
        case "text":
          body.append(shownText(part.text, rich));
          break;
        case "reasoning": {
          const fold = el("details", "reasoning-fold");
          fold.append(el("summary", null, "Reasoning (" + (part.visibility || "public") + ")"), shownText(part.text, false));
          body.append(fold);
          break;
        }
        case "json":
          body.append(details("json", JSON.stringify(part.json, null, 2)));
          break;
        case "file_ref":
          body.append(el("div", "file", part.action + " " + part.path));
          if (part.diff) body.append(details("diff", part.diff));
          break;
        case "image":
          body.append(el("div", "file", "image " + part.path + (part.mime ? " (" + part.mime + ")" : "")));
          break;
        case "status":
          body.append(el("div", "muted", part.label + (part.detail ? ": " + part.detail : "")));
          break;
        case "tool_call":
          body.append(el("div", "file", "calls " + part.name), details("arguments", part.arguments));
          break;
        case "tool_result":
          body.append(details("output", part.output));
          break;
        default:
          body.append(details(part.type || "part", JSON.stringify(part, null, 2)));
      }
    }
  }

  permission(event, d) {
    const row = this.row("permission:" + d.permission_id, "request permission");
    row.events.push(event);
    if (event.type === "permission.requested") {
      this.heading(row, [["who", "permission"], ["what", [d.category, d.tool_name].filter(Boolean).join(" · ")], ["state", "waiting"]], event.sequence);
      row.body.replaceChildren();
      row.body.append(block("div", "text action", d.action));
      if (d.command) row.body.append(commandBlock(d.command, d.command_bytes));
      const facts = el("div", "facts");
      if (d.cwd) facts.append(fact("cwd", d.cwd));
      if (d.file) facts.append(fact("file", d.file));
      if (d.reason) facts.append(fact("reason", d.reason));
      if (facts.childElementCount) row.body.append(facts);
      if (d.diff) row.body.append(details("diff", d.diff, true));
      if (this.handlers.live() && !this.ended) {
        const bar = el("div", "answer");
        for (const [reply, label, cls] of [["once", "Allow once", "allow"], ["always", "Allow always", "allow"], ["reject", "Reject", "deny"]]) {
          const button = el("button", cls, label);
          button.type = "button";
          button.dataset.reply = reply;
          button.addEventListener("click", () => this.act(bar, () => this.handlers.permission(d.permission_id, reply)));
          bar.append(button);
        }
        row.body.append(bar);
        this.waitFor(row);
      }
    } else {
      this.resolved(row, d.status, d.decided_by, event.sequence, [["who", "permission"], ["what", [d.category, d.tool_name].filter(Boolean).join(" · ")]]);
    }
  }

  question(event, d) {
    const row = this.row("question:" + d.question_id, "request question");
    row.events.push(event);
    if (event.type === "question.requested") {
      this.heading(row, [["who", "question"], ["state", "waiting"]], event.sequence);
      row.body.replaceChildren();
      row.body.append(block("div", "text action", d.prompt));
      if (this.handlers.live() && !this.ended) {
        const bar = el("div", "answer");
        for (const option of d.options || []) {
          const button = el("button", "option", option);
          button.type = "button";
          button.addEventListener("click", () => this.act(bar, () => this.handlers.answer(d.question_id, option)));
          bar.append(button);
        }
        const input = el("input", "free");
        input.placeholder = "Another answer";
        input.setAttribute("aria-label", "Answer");
        const send = el("button", "allow", "Answer");
        send.type = "button";
        const answer = () => input.value.trim() && this.act(bar, () => this.handlers.answer(d.question_id, input.value.trim()));
        send.addEventListener("click", answer);
        input.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); answer(); } });
        const reject = el("button", "deny", "Reject");
        reject.type = "button";
        reject.addEventListener("click", () => this.act(bar, () => this.handlers.reject(d.question_id)));
        bar.append(input, send, reject);
        row.body.append(bar);
        this.waitFor(row);
      }
    } else {
      if (d.response) row.body.append(el("div", "response", "answer: " + d.response));
      this.resolved(row, d.status, d.decided_by, event.sequence, [["who", "question"]]);
    }
  }

  resolved(row, status, decidedBy, sequence, parts) {
    this.heading(row, parts.concat([["state " + cssName(status), status], ["by", decidedBy ? "by " + decidedBy : ""]]), sequence);
    row.node.classList.add("resolved", "status-" + cssName(status));
    this.settle(row.key);
  }

  /** A request now waits for the person: the first one waiting is scrolled into view. */
  waitFor(row) {
    this.pending.add(row.key);
    if (this.pending.size === 1) this.scrollTo = row;
  }

  /** The request in `key` needs no answer any more. */
  settle(key) {
    this.pending.delete(key);
    const row = this.rows.get(key);
    if (row) for (const bar of row.body.querySelectorAll(".answer")) bar.remove();
  }

  async act(bar, call) {
    const buttons = bar.querySelectorAll("button, input");
    for (const b of buttons) b.disabled = true;
    try {
      await call();
    } catch {
      for (const b of buttons) b.disabled = false;
    }
  }

  /** The first request still waiting for an answer, if any. */
  firstPending() {
    for (const key of this.pending) return this.rows.get(key);
    return null;
  }
}

function cssName(value) {
  return String(value ?? "").replace(/[^a-z0-9_-]/gi, "");
}

function fact(name, value) {
  const node = el("span", "fact");
  node.append(el("span", "fact-name", name), el("span", "fact-value", value));
  return node;
}

function details(summary, body, open) {
  const node = el("details", "more");
  if (open) node.open = true;
  const pre = el("pre", null);
  pre.textContent = text(body);
  node.append(el("summary", null, summary), pre);
  return node;
}

/** A "show all" button that calls `reveal` once and goes away. */
function showAll(label, reveal) {
  const button = el("button", "show-all", label);
  button.type = "button";
  button.addEventListener("click", () => { button.remove(); reveal(); });
  return button;
}

/** Streamed text in a row: every delta kept, the first `max` characters shown (set once a frame
 * by `render`), the rest behind "show all". */
class Bounded {
  constructor(parent, max) {
    this.max = max;
    this.chunks = [];
    this.length = 0;
    this.shown = 0;
    this.all = false;
    this.holder = el("div", "text");
    this.node = document.createTextNode("");
    this.holder.append(this.node);
    this.more = el("div", "more-text");
    this.more.hidden = true;
    parent.append(this.holder, this.more);
  }

  append(delta) {
    const piece = text(delta);
    this.chunks.push(piece);
    this.length += piece.length;
  }

  /** Shows what fits (or everything, after "show all") and counts the rest. */
  render() {
    const limit = this.all ? Infinity : this.max;
    if (this.shown < limit && this.shown < this.length) {
      const whole = this.chunks.join("");
      this.chunks = [whole];
      const next = Math.min(limit, whole.length);
      this.node.appendData(whole.slice(this.shown, next));
      this.shown = next;
    }
    const rest = this.length - this.shown;
    this.more.hidden = rest <= 0;
    if (rest > 0) {
      this.more.replaceChildren(el("span", "muted", "… " + rest.toLocaleString("en") + " more characters "),
        showAll("show all", () => { this.all = true; this.render(); }));
    }
  }
}

/** Text of a message or reasoning: Markdown for an assistant's answer (`rich`), plain otherwise;
 * the first TEXT_SHOWN characters, the rest behind "show all". */
function shownText(value, rich) {
  const whole = String(value ?? "");
  const holder = el("div", "shown");
  const head = whole.length > TEXT_SHOWN ? whole.slice(0, TEXT_SHOWN) : whole;
  holder.append(rich ? markdown(head) : block("div", "text", head));
  if (whole.length > TEXT_SHOWN) {
    const more = el("div", "more-text");
    more.append(el("span", "muted", "… " + (whole.length - TEXT_SHOWN).toLocaleString("en") + " more characters "),
      showAll("show all", () => { holder.replaceChildren(block("div", "text", whole)); }));
    holder.append(more);
  }
  return holder;
}

/**
 * A command to approve or that ran, so that a person sees all of what runs: padding, newlines,
 * carriage returns and invisible characters shown by `text.js`'s `command` (the terminal's rule),
 * the first COMMAND_SHOWN characters with the cut marked and the rest behind "show all", its real
 * length when it is long or cut, and a warning when the request itself holds only part of it
 * (`command_bytes`).
 */
function commandBlock(raw, commandBytes) {
  const holder = el("div", "command-block");
  const shown = shownCommand(raw);
  const pre = el("pre", "command");
  const size = new TextEncoder().encode(String(raw)).length;
  const cut = shown.length > COMMAND_SHOWN;
  pre.textContent = "$ " + (cut ? shown.slice(0, COMMAND_SHOWN) : shown);
  holder.append(pre);
  if (cut) {
    const mark = el("div", "cut");
    mark.append(el("span", "cut-mark", "✂ cut: " + COMMAND_SHOWN.toLocaleString("en") + " of " + shown.length.toLocaleString("en") +
      " characters shown "), showAll("show all", () => { pre.textContent = "$ " + shown; mark.remove(); }));
    holder.append(mark);
  }
  if (cut || shown !== String(raw) || typeof commandBytes === "number") {
    holder.append(el("div", "command-size", "length: " + (typeof commandBytes === "number" ? commandBytes : size).toLocaleString("en") + " bytes"));
  }
  if (typeof commandBytes === "number") {
    holder.append(el("div", "command-warning", "The command is " + commandBytes.toLocaleString("en") + " bytes; this request holds only its first " +
      size.toLocaleString("en") + " (all shown here). Approving runs all of it."));
  }
  return holder;
}
