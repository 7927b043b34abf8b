// The inspector's page: connect, sessions (live and stored), a new session, agents, the agents'
// own stored sessions, the request log, and up to two transcripts side by side. It speaks only the
// public HTTP API (api.js) with the token; every agent string is shown as text (text.js).

import { Api } from "./api.js";
import { Transcript } from "./transcript.js";
import { el, line, usd } from "./text.js";

const $ = (selector, root = document) => root.querySelector(selector);
const TOKEN_KEY = "agent-api-inspector-token";
const MAX_PANES = 2;

const api = new Api(location.origin);
const emptyNote = $("#empty");
const state = { connected: false, agents: [], sessions: [], panes: [], active: null, poll: null };

// ---- notices and status ----

let noticeTimer = null;
function notice(message, kind = "error") {
  const box = $("#notice");
  box.textContent = line(message, 1024);
  box.className = kind;
  box.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { box.hidden = true; }, 8000);
}

function setStatus(textValue, kind) {
  const status = $("#status");
  status.textContent = textValue;
  status.className = "status " + (kind || "");
}

// ---- the request log ----

api.onLog = (entry) => {
  const list = $("#requests");
  const item = el("li", entry.status >= 400 || entry.error ? "bad" : "");
  const time = entry.time.toTimeString().slice(0, 8);
  item.append(el("span", "time", time), el("span", "method", entry.method), el("span", "path", entry.path),
    el("span", "code", entry.error ? "failed" : String(entry.status)), el("span", "ms", entry.method === "SSE" ? "" : entry.ms + " ms"));
  list.prepend(item);
  while (list.childElementCount > 300) list.lastElementChild.remove();
};

// ---- connect ----

function readFragment() {
  // `#token=…`: the URL `agent-api serve --open` prints. A fragment never reaches the server or a
  // log; it is removed from the address bar at once and kept for this tab only.
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token !== null) {
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", location.pathname + location.search);
  }
}

async function connect() {
  api.token = $("#token").value.trim();
  setStatus("connecting…");
  try {
    const [agents] = await Promise.all([api.get("/v1/agents"), api.get("/v1/sessions")]);
    sessionStorage.setItem(TOKEN_KEY, api.token);
    state.connected = true;
    state.agents = agents.agents || [];
    setStatus("connected", "ok");
    renderAgents();
    await refreshSessions();
    clearInterval(state.poll);
    state.poll = setInterval(() => { if (!document.hidden) refreshSessions().catch(() => {}); }, 3000);
    return true;
  } catch (error) {
    state.connected = false;
    setStatus(error.status === 401 ? "wrong token" : "offline", "bad");
    notice(error.message);
    return false;
  }
}

// ---- tabs ----

function showTab(name) {
  for (const button of document.querySelectorAll(".tabs button")) button.classList.toggle("on", button.dataset.tab === name);
  for (const tab of document.querySelectorAll(".tab")) tab.hidden = tab.id !== "tab-" + name;
  if (name === "new" && !$("#new-id").value) $("#new-id").value = "s-" + Math.random().toString(36).slice(2, 8);
}

// ---- sessions ----

async function refreshSessions() {
  const list = await api.get("/v1/sessions");
  state.sessions = list.sessions || [];
  for (const pane of state.panes) if (pane && pane.kind === "session") updatePaneInfo(pane, state.sessions.find((s) => s.sessionId === pane.id));
  // Rebuilt only when it changed: a poll never moves what a person is about to click.
  const key = JSON.stringify(state.sessions.map((s) => [s.sessionId, s.agent, s.ended, s.live, s.endError, s.eventCount]));
  if (key === state.sessionsKey) return;
  state.sessionsKey = key;
  const ul = $("#sessions");
  ul.replaceChildren();
  // Newest first on the page (the API lists the oldest first).
  for (const s of state.sessions.slice().reverse()) {
    const li = el("li", "session" + (s.ended ? " ended" : ""));
    const open = el("button", "open");
    open.type = "button";
    open.dataset.session = s.sessionId;
    const status = s.ended ? (s.endError ? "ended (error)" : "ended") : s.live ? "live" : "stored";
    open.append(el("span", "id", s.sessionId), el("span", "agent", s.agent), el("span", "badge " + status.split(" ")[0], status),
      el("span", "count", s.eventCount + " events"));
    open.addEventListener("click", () => openSession(s.sessionId, 0));
    const beside = el("button", "beside", "⇆");
    beside.type = "button";
    beside.title = "Open beside";
    beside.addEventListener("click", () => openSession(s.sessionId, 1));
    li.append(open, beside);
    ul.append(li);
  }
}

// ---- agents ----

function renderAgents() {
  const ul = $("#agents");
  ul.replaceChildren();
  const select = $("#new-agent");
  const historySelect = $("#history-agent");
  select.replaceChildren();
  historySelect.replaceChildren();
  for (const agent of state.agents) {
    const li = el("li", "agent" + (agent.installed ? "" : " missing"));
    li.append(el("strong", null, agent.id), el("span", "badge " + (agent.installed ? "live" : "ended"), agent.installed ? "installed" : "not installed"));
    if (agent.version) li.append(el("span", "version", agent.version));
    if (agent.path) li.append(el("div", "path", agent.path));
    const caps = el("div", "caps");
    for (const [name, on] of Object.entries(agent.capabilities || {})) {
      const chip = el("span", "cap " + (on ? "on" : "off"), name);
      caps.append(chip);
    }
    li.append(caps);
    if (agent.capabilityIds && agent.capabilityIds.length) {
      const more = el("details", "more");
      const pre = el("pre");
      pre.textContent = agent.capabilityIds.map((id) => line(id, 200)).join("\n");
      more.append(el("summary", null, agent.capabilityIds.length + " capability ids"), pre);
      li.append(more);
    }
    ul.append(li);
    const option = el("option", null, agent.id + (agent.installed ? "" : " (not installed)"));
    option.value = agent.id;
    select.append(option);
    const historyOption = el("option", null, agent.id);
    historyOption.value = agent.id;
    historySelect.append(historyOption);
  }
}

async function createSession(event) {
  event.preventDefault();
  const id = $("#new-id").value.trim();
  const body = { agent: $("#new-agent").value, permissionMode: $("#new-permission").value };
  const model = $("#new-model").value.trim();
  if (model) body.model = model;
  const options = $("#new-options").value.trim();
  if (options) {
    try {
      body.options = JSON.parse(options);
    } catch (error) {
      notice("the backend options are not JSON: " + error.message);
      return;
    }
  }
  try {
    await api.post("/v1/sessions/" + encodeURIComponent(id), body);
  } catch (error) {
    notice(error.message);
    return;
  }
  $("#new-id").value = "";
  showTab("sessions");
  await refreshSessions().catch(() => {});
  const pane = await openSession(id, 0);
  $("textarea", pane.node).focus();
}

// ---- history (the agents' own stored sessions) ----

async function listHistory(event) {
  event.preventDefault();
  const agent = $("#history-agent").value;
  const ul = $("#history");
  ul.replaceChildren(el("li", "muted", "reading…"));
  try {
    const list = await api.get("/v1/agents/" + encodeURIComponent(agent) + "/history");
    ul.replaceChildren();
    if (!list.sessions.length) ul.append(el("li", "muted", "no stored session"));
    for (const s of list.sessions) {
      const li = el("li", "session");
      const open = el("button", "open");
      open.type = "button";
      open.append(el("span", "id", s.title || s.firstPrompt || s.id), el("span", "agent", s.time || ""), el("span", "count", s.cwd || ""));
      open.addEventListener("click", () => openHistory(agent, s.id, 0));
      const beside = el("button", "beside", "⇆");
      beside.type = "button";
      beside.title = "Open beside";
      beside.addEventListener("click", () => openHistory(agent, s.id, 1));
      li.append(open, beside);
      ul.append(li);
    }
  } catch (error) {
    ul.replaceChildren(el("li", "bad", error.message));
  }
}

// ---- panes ----

function makePane(slot, kind, id, agent) {
  closePane(slot);
  const node = $("#pane").content.firstElementChild.cloneNode(true);
  const pane = { slot, kind, id, agent, node, abort: new AbortController(), live: kind === "session", info: null };
  $(".name", node).textContent = line(id, 200);
  const link = $(".link", node);
  link.href = kind === "session" ? "/ui/sessions/" + encodeURIComponent(id) : "/ui/history/" + encodeURIComponent(agent) + "/" + encodeURIComponent(id);
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  pane.transcript = new Transcript($(".events", node), {
    live: () => pane.live,
    permission: (permission, reply) => act(pane, "/permissions/" + encodeURIComponent(permission) + "/reply", { reply }),
    answer: (question, answer) => act(pane, "/questions/" + encodeURIComponent(question) + "/reply", { answers: [[answer]] }),
    reject: (question) => act(pane, "/questions/" + encodeURIComponent(question) + "/reject"),
    events: (row) => eventsOf(pane, row),
    changed: (kinds) => changed(pane, kinds),
  });
  $(".close", node).addEventListener("click", () => closePane(slot));
  $(".cancel", node).addEventListener("click", () => cancelTurn(pane));
  $(".terminate", node).addEventListener("click", () => act(pane, "/terminate").then(() => refreshSessions()).catch(() => {}));
  const composer = $(".composer", node);
  const input = $("textarea", composer);
  composer.addEventListener("submit", (event) => { event.preventDefault(); send(pane, input); });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send(pane, input);
    }
  });
  node.addEventListener("focusin", () => { state.active = pane; });
  node.addEventListener("pointerdown", () => { state.active = pane; });
  if (kind !== "session") {
    composer.hidden = true;
    $(".cancel", node).hidden = true;
    $(".terminate", node).hidden = true;
  }
  state.panes[slot] = pane;
  state.active = pane;
  layout();
  return pane;
}

function layout() {
  const holder = $("#panes");
  const panes = state.panes.filter(Boolean);
  holder.replaceChildren(...(panes.length ? panes.map((p) => p.node) : [emptyNote]));
  holder.classList.toggle("two", panes.length === 2);
  const first = state.panes[0] || panes[0];
  let path = "/ui/";
  if (first) path = first.kind === "session" ? "/ui/sessions/" + encodeURIComponent(first.id) : "/ui/history/" + encodeURIComponent(first.agent) + "/" + encodeURIComponent(first.id);
  if (location.pathname !== path) history.replaceState(null, "", path);
}

function closePane(slot) {
  const pane = state.panes[slot];
  if (!pane) return;
  pane.abort.abort();
  state.panes[slot] = null;
  if (state.active === pane) state.active = state.panes.find(Boolean) || null;
  layout();
}

async function openSession(id, slot) {
  slot = Math.min(slot, MAX_PANES - 1);
  if (slot === 1 && !state.panes[0]) slot = 0;
  const info = state.sessions.find((s) => s.sessionId === id);
  const pane = makePane(slot, "session", id, info ? info.agent : "");
  updatePaneInfo(pane, info);
  const path = "/v1/sessions/" + encodeURIComponent(id) + "/events/sse";
  api.follow(path, () => pane.transcript.lastSequence, (event) => { followTurn(pane, event); pane.transcript.push(event); }, pane.abort.signal, (streamState, error) => {
    if (streamState === "reconnecting") setPaneState(pane, "reconnecting…");
    else if (streamState === "failed") { setPaneState(pane, "failed"); notice(error.message); }
    else if (streamState === "live") setPaneState(pane, "");
    else if (streamState === "ended") { pane.live = false; setPaneState(pane, ""); refreshInfo(pane); }
  });
  refreshInfo(pane);
  return pane;
}

async function openHistory(agent, id, slot) {
  slot = Math.min(slot, MAX_PANES - 1);
  if (slot === 1 && !state.panes[0]) slot = 0;
  const pane = makePane(slot, "history", id, agent);
  pane.live = false;
  $(".meta", pane.node).textContent = line(agent + " · the agent's own stored session", 200);
  const base = "/v1/agents/" + encodeURIComponent(agent) + "/history/" + encodeURIComponent(id) + "/events";
  try {
    for (;;) {
      const page = await api.get(base + "?offset=" + pane.transcript.lastSequence + "&limit=1000");
      if (pane.abort.signal.aborted) return pane;
      for (const event of page.events) pane.transcript.push(event);
      if (!page.hasMore || page.events.length === 0) break;
    }
  } catch (error) {
    notice(error.message);
  }
  return pane;
}

function setPaneState(pane, value) {
  pane.streamState = value;
  renderPaneMeta(pane);
}

async function refreshInfo(pane) {
  // A stored session of the agent's own has no SessionInfo here.
  if (pane.kind !== "session") return;
  try {
    const info = await api.get("/v1/sessions/" + encodeURIComponent(pane.id));
    updatePaneInfo(pane, info);
  } catch { /* the list poll tries again */ }
}

function updatePaneInfo(pane, info) {
  if (!info) return;
  pane.info = info;
  pane.agent = info.agent;
  if (info.ended || !info.live) pane.live = false;
  renderPaneMeta(pane);
}

function renderPaneMeta(pane) {
  const info = pane.info;
  if (pane.kind !== "session") return;
  const parts = [];
  if (info) {
    parts.push(info.agent);
    if (info.model) parts.push(info.model);
    parts.push(info.ended ? "ended" : info.live ? "live" : "stored");
    parts.push(info.eventCount + " events");
  }
  if (pane.streamState) parts.push(pane.streamState);
  if (pane.transcript && pane.transcript.pending.size) parts.push("waiting for you");
  $(".meta", pane.node).textContent = line(parts.join(" · "), 300);
  const usage = info && info.usage;
  const u = [];
  if (usage) {
    if (usage.inputTokens !== undefined) u.push("in " + usage.inputTokens);
    if (usage.cachedInputTokens) u.push("cached " + usage.cachedInputTokens);
    if (usage.outputTokens !== undefined) u.push("out " + usage.outputTokens);
    if (usage.reasoningTokens) u.push("reasoning " + usage.reasoningTokens);
    if (usage.costUsd !== undefined) u.push(usd(usage.costUsd));
    u.push(usage.turns + (usage.turns === 1 ? " turn" : " turns"));
  }
  $(".usage", pane.node).textContent = u.length ? "usage: " + u.join(" · ") : "";
  const live = pane.live && !(info && info.ended);
  $(".cancel", pane.node).disabled = !live;
  $(".terminate", pane.node).disabled = !live;
  $("textarea", pane.node).disabled = !live;
  $(".composer button", pane.node).disabled = !live;
  pane.node.classList.toggle("ended", !live);
}

function changed(pane, kinds) {
  if (kinds.has("session.ended") || kinds.has("item.completed")) refreshInfo(pane);
  if (kinds.has("session.ended")) {
    pane.live = false;
    refreshSessions().catch(() => {});
  }
  const waiting = $(".waiting", pane.node);
  const first = pane.transcript.firstPending();
  waiting.hidden = !first;
  if (first) {
    waiting.replaceChildren(el("span", null, "The agent waits for your answer: "));
    const go = el("button", "go", "show");
    go.type = "button";
    go.addEventListener("click", () => first.node.scrollIntoView({ block: "center" }));
    waiting.append(go);
  }
  renderPaneMeta(pane);
}

async function act(pane, suffix, body) {
  try {
    return await api.post("/v1/sessions/" + encodeURIComponent(pane.id) + suffix, body);
  } catch (error) {
    notice(error.message);
    throw error;
  }
}

async function send(pane, input) {
  const message = input.value;
  if (!message.trim() || !pane.live) return;
  input.value = "";
  try {
    // While a turn runs on an agent that can be steered, the message joins that turn.
    await act(pane, steering(pane) ? "/steer" : "/messages", { message });
  } catch {
    input.value = message;
  }
}

// ---- steering: the message box steers the running turn where the agent can be steered ----

/** Follows the session's turn delimiters (the server's own status items) to know whether a turn runs. */
function followTurn(pane, event) {
  const item = event.type === "item.completed" && event.source === "daemon" && event.data && event.data.item;
  const label = item && item.kind === "status" && item.content && item.content[0] && item.content[0].label;
  const running = label === "turn_started" ? true : label === "turn_completed" || label === "turn_failed" ? false : null;
  if (event.type === "session.ended") pane.turnRunning = false;
  else if (running !== null) pane.turnRunning = running;
  else return;
  showComposer(pane);
}

/** Whether the pane's message would steer: a turn runs and its agent advertises agent_api.control.steer. */
function steering(pane) {
  const agent = state.agents.find((a) => a.id === pane.agent);
  return Boolean(pane.turnRunning && agent && (agent.capabilityIds || []).includes("agent_api.control.steer"));
}

function showComposer(pane) {
  const steer = steering(pane);
  const button = $(".composer button", pane.node);
  button.textContent = steer ? "Steer" : "Send";
  button.title = steer ? "Add this message to the running turn (the agent reads it at its next step)" : "";
  $("textarea", pane.node).placeholder = steer
    ? "Steer the running turn (Enter steers, Shift+Enter: new line, Esc cancels the turn)"
    : "Message (Enter sends, Shift+Enter: new line, Esc cancels the turn)";
}

function cancelTurn(pane) {
  if (pane && pane.kind === "session" && pane.live) act(pane, "/cancel").catch(() => {});
}

/** The events of a row for its JSON view: as received, or read again with their raw payloads. */
async function eventsOf(pane, row) {
  if (!$(".raw-box", pane.node).checked) return row.events;
  const sequences = row.events.map((e) => e.sequence);
  const first = Math.min(...sequences);
  const last = Math.max(...sequences);
  const base = pane.kind === "session"
    ? "/v1/sessions/" + encodeURIComponent(pane.id) + "/events"
    : "/v1/agents/" + encodeURIComponent(pane.agent) + "/history/" + encodeURIComponent(pane.id) + "/events";
  const wanted = new Set(sequences);
  const out = [];
  let offset = first - 1;
  while (offset < last) {
    const page = await api.get(base + "?include_raw=true&offset=" + offset + "&limit=" + Math.min(1000, last - offset));
    for (const event of page.events) if (wanted.has(event.sequence)) out.push(event);
    if (!page.events.length) break;
    offset = page.events[page.events.length - 1].sequence;
  }
  return out;
}

// ---- start ----

function route() {
  const parts = location.pathname.replace(/^\/ui\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "sessions" && parts[1]) return () => openSession(parts[1], 0);
  if (parts[0] === "history" && parts[1] && parts[2]) return () => openHistory(parts[1], parts[2], 0);
  return null;
}

async function start() {
  $("#endpoint").textContent = location.origin;
  readFragment();
  $("#token").value = sessionStorage.getItem(TOKEN_KEY) || "";
  for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => showTab(button.dataset.tab));
  $("#connect").addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await connect()) { const open = route(); if (open && !state.panes.some(Boolean)) open(); }
  });
  $("#refresh").addEventListener("click", () => refreshSessions().catch((error) => notice(error.message)));
  $("#create").addEventListener("submit", createSession);
  $("#history-form").addEventListener("submit", listHistory);
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const pane = state.active || state.panes.find(Boolean);
    cancelTurn(pane);
  });
  // Without a token nothing is asked of the server (a 401 would only be noise): the person types
  // it, or presses Connect on a server started with --no-token.
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    setStatus("enter the token, then Connect");
    $("#token").focus();
    return;
  }
  if (await connect()) {
    const open = route();
    if (open) open();
  }
}

start();
