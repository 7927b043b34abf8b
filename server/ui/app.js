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
const state = { connected: false, agents: [], sessions: [], panes: [], active: null, poll: null, created: new Map() };
/** Sessions shown in the list at first, and added by each "show more". */
const SESSIONS_PAGE = 100;

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
    state.poll = setInterval(() => { if (!document.hidden) poll(); }, 3000);
    return true;
  } catch (error) {
    state.connected = false;
    setStatus(error.status === 401 ? "wrong token" : "offline", "bad");
    notice(error.message);
    return false;
  }
}

/** The list's poll. While the server cannot be reached (it restarts, the network is down) the
 * page says "reconnecting…" and keeps polling; the first answer says "connected" again. */
async function poll() {
  try {
    await refreshSessions();
    if (state.reconnecting) {
      state.reconnecting = false;
      setStatus("connected", "ok");
    }
  } catch (error) {
    if (error.status === 0) {
      state.reconnecting = true;
      setStatus("reconnecting…", "bad");
    } else if (error.status === 401) {
      setStatus("wrong token", "bad");
    }
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
  state.byId = new Map(state.sessions.map((s) => [s.sessionId, s]));
  for (const pane of state.panes) if (pane && pane.kind === "session") updatePaneInfo(pane, state.byId.get(pane.id));
  renderSessions();
}

/** The status a session's badge shows. */
function sessionStatus(s) {
  return s.ended ? (s.endError ? "ended (error)" : "ended") : s.live ? "live" : "stored";
}

/**
 * The sessions list, newest first (the API lists the oldest first), updated in place: a row is
 * made once per session and only its changed fields are written again, so a poll never rebuilds
 * the list nor moves what a person is about to click. Only the first `state.shown` rows exist
 * (SESSIONS_PAGE more with each "show more"): 10,000 sessions are 100 rows, not 10,000.
 */
function renderSessions() {
  const ul = $("#sessions");
  if (!state.rows) state.rows = new Map();
  if (!state.shown) state.shown = SESSIONS_PAGE;
  const total = state.sessions.length;
  const wanted = [];
  for (let i = total - 1; i >= 0 && wanted.length < state.shown; i--) wanted.push(state.sessions[i]);
  const keep = new Set(wanted.map((s) => s.sessionId));
  for (const [id, row] of state.rows) {
    if (!keep.has(id)) { row.li.remove(); state.rows.delete(id); }
  }
  let previous = null;
  for (const s of wanted) {
    let row = state.rows.get(s.sessionId);
    if (!row) {
      row = sessionRow(s);
      state.rows.set(s.sessionId, row);
    }
    updateSessionRow(row, s);
    const expected = previous ? previous.li.nextElementSibling : ul.firstElementChild;
    if (expected !== row.li) {
      if (previous) previous.li.after(row.li);
      else ul.prepend(row.li);
    }
    previous = row;
  }
  const more = $("#sessions-more");
  more.hidden = total <= state.shown;
  more.textContent = total > state.shown ? "show " + Math.min(SESSIONS_PAGE, total - state.shown) + " more (" + total + " in all)" : "";
  $("#sessions-count").textContent = total ? total + (total === 1 ? " session" : " sessions") : "no session";
}

function sessionRow(s) {
  const li = el("li", "session");
  const open = el("button", "open");
  open.type = "button";
  open.dataset.session = s.sessionId;
  const id = el("span", "id", s.sessionId);
  const agent = el("span", "agent", s.agent);
  const badge = el("span", "badge");
  const count = el("span", "count");
  open.append(id, agent, badge, count);
  open.addEventListener("click", () => openSession(s.sessionId, 0));
  const beside = el("button", "beside", "⇆");
  beside.type = "button";
  beside.title = "Open beside";
  beside.addEventListener("click", () => openSession(s.sessionId, 1));
  li.append(open, beside);
  return { li, badge, count, agent, status: null, events: null };
}

function updateSessionRow(row, s) {
  const status = sessionStatus(s);
  if (row.status !== status) {
    row.status = status;
    row.badge.className = "badge " + status.split(" ")[0];
    row.badge.textContent = status;
    row.li.classList.toggle("ended", Boolean(s.ended));
  }
  if (row.events !== s.eventCount) {
    row.events = s.eventCount;
    row.count.textContent = s.eventCount + " events";
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
  select.value = defaultAgent(state.agents);
  agentChosen();
}

/** The agent the New form starts with: the first installed one that runs with nothing more to
 * set (an ACP agent needs its command), else the scripted agent, else the first listed. */
function defaultAgent(agents) {
  const runs = agents.filter((a) => a.installed && !needsCommand(a.id));
  const real = runs.find((a) => a.path);
  const pick = real || runs.find((a) => a.id === "scripted") || runs[0] || agents[0];
  return pick ? pick.id : "";
}

/** Whether an agent runs only with a command named in its options (the generic ACP kind). */
function needsCommand(id) {
  return id === "acp";
}

/** Shows the ACP command field for an agent that needs one, and the modes of the chosen agent. */
function agentChosen() {
  const agent = $("#new-agent").value;
  $("#new-acp").hidden = !needsCommand(agent);
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
  if (needsCommand(body.agent)) {
    // The command as an argv, split on spaces (no shell ever reads it).
    const argv = $("#new-acp-command").value.trim().split(/\s+/).filter(Boolean);
    if (!argv.length) {
      notice("an ACP agent needs its command (for example: opencode acp)");
      $("#new-acp-command").focus();
      return;
    }
    body.options = { ...(body.options || {}), "backend.acp.command": argv };
  }
  try {
    await api.post("/v1/sessions/" + encodeURIComponent(id), body);
  } catch (error) {
    notice(error.message);
    return;
  }
  $("#new-id").value = "";
  state.created.set(id, body.options || null);
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
  $(".terminate", node).addEventListener("click", () => terminate(pane));
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
  pane.timer = setInterval(() => renderBusy(pane), 1000);
  pane.abort.signal.addEventListener("abort", () => clearInterval(pane.timer));
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
  }, () => pane.transcript.endSeen);
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
    // Messages sent while a turn runs wait in the session's queue, each then a turn of its own.
    if (info.queued) parts.push(info.queued + " queued");
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
  renderSettings(pane);
  renderBusy(pane);
  $(".cancel", pane.node).disabled = !live || pane.transcript.busySince === null;
  $(".terminate", pane.node).disabled = !live;
  $("textarea", pane.node).disabled = !live;
  $(".composer button", pane.node).disabled = !live;
  pane.node.classList.toggle("ended", !live);
}

/** A session's settings: agent, model, variant, mode, permission mode, and the options this page
 * created it with (the API does not return them). */
function renderSettings(pane) {
  const info = pane.info;
  const box = $(".settings", pane.node);
  if (!info) { box.hidden = true; return; }
  const facts = [["agent", info.agent], ["model", info.model || "default"], ["variant", info.variant], ["mode", info.agentMode],
    ["permissions", info.permissionMode]];
  const options = state.created.get(pane.id);
  if (options) facts.push(["options", JSON.stringify(options)]);
  const key = JSON.stringify(facts);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...facts.filter(([, v]) => v).map(([name, value]) => {
    const fact = el("span", "fact");
    fact.append(el("span", "fact-name", name), el("span", "fact-value", value));
    return fact;
  }));
  box.hidden = false;
  modeSelector(pane, info);
}

/** A mode selector beside the message box, for an agent that switches modes within a session:
 * the next message is sent with the chosen `agentMode`. */
async function modeSelector(pane, info) {
  if (pane.modesFor === info.agent) return;
  pane.modesFor = info.agent;
  const agent = state.agents.find((a) => a.id === info.agent);
  const select = $(".mode", pane.node);
  if (!agent || !(agent.capabilityIds || []).includes("agent_api.session.mode_switch")) { select.hidden = true; return; }
  try {
    const listed = await api.get("/v1/agents/" + encodeURIComponent(info.agent) + "/modes");
    select.replaceChildren(...(listed.modes || []).map((m) => {
      const option = el("option", null, m.name || m.id);
      option.value = m.id;
      option.title = line(m.description || "", 300);
      return option;
    }));
    select.value = info.agentMode || "build";
    select.hidden = select.options.length < 2;
  } catch { select.hidden = true; }
}

/** "working… 12 s" while a turn runs. */
function renderBusy(pane) {
  const busy = $(".busy", pane.node);
  const since = pane.transcript && pane.transcript.busySince;
  const running = since !== null && since !== undefined && pane.live;
  busy.hidden = !running;
  if (running) busy.textContent = "working… " + Math.max(0, Math.round((Date.now() - since) / 1000)) + " s";
  const cancel = $(".cancel", pane.node);
  if (cancel) cancel.disabled = !running;
}

/** Terminate asks first: the button becomes "Confirm terminate" for a few seconds. */
function terminate(pane) {
  const button = $(".terminate", pane.node);
  if (!button.classList.contains("confirm")) {
    button.classList.add("confirm");
    button.textContent = "Confirm terminate";
    clearTimeout(pane.confirmTimer);
    pane.confirmTimer = setTimeout(() => { button.classList.remove("confirm"); button.textContent = "Terminate"; }, 5000);
    return;
  }
  clearTimeout(pane.confirmTimer);
  button.classList.remove("confirm");
  button.textContent = "Terminate";
  pane.transcript.mine.add("terminate");
  act(pane, "/terminate").then(() => refreshSessions()).catch(() => pane.transcript.mine.delete("terminate"));
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
  const body = { message };
  const mode = $(".mode", pane.node);
  if (!mode.hidden && mode.value && pane.info && mode.value !== pane.info.agentMode) body.agentMode = mode.value;
  try {
    // While a turn runs on an agent that can be steered, the message joins that turn.
    if (steering(pane)) {
      await act(pane, "/steer", { message });
      return;
    }
    await act(pane, "/messages", body);
    // Busy from now: the turn's own `turn_started` sets the time it began.
    if (pane.transcript.busySince === null) pane.transcript.busy(Date.now());
    renderBusy(pane);
    if (body.agentMode) refreshInfo(pane);
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
  if (!pane || pane.kind !== "session" || !pane.live || pane.transcript.busySince === null) return;
  pane.transcript.mine.add("cancel");
  act(pane, "/cancel").catch(() => pane.transcript.mine.delete("cancel"));
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
  $("#new-agent").addEventListener("change", agentChosen);
  $("#sessions-more").addEventListener("click", () => { state.shown = (state.shown || SESSIONS_PAGE) + SESSIONS_PAGE; renderSessions(); });
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
