// The client against a real `agent-api serve` running the scripted agent: a streamed turn, a
// permission approved by a callback, a question answered, a cancel, a reconnect after the server
// was killed mid-stream (no gap, no duplicate), a session resumed after a restart, typed errors.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  AgentApiClient, AnswerText, Conflict, ENUMS, EVENT_FIELDS, FIELDS, NotFound, PART_FIELDS, TooManyRequests, Unauthorized,
} from "../dist/index.js";
import { ROOT, Server } from "./server.mjs";

const scripted = (scenario, delay = 0) => ({ "backend.scripted.scenario": scenario, "backend.scripted.delay_ms": delay });

function contiguous(events) {
  const sequences = events.map((e) => e.sequence);
  assert.deepEqual(sequences, sequences.map((_, i) => sequences[0] + i));
}

describe("against a server on the memory store", () => {
  let directory, server, api;
  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "agent-api-ts-"));
    server = await Server.make(directory);
    api = new AgentApiClient(server.url, { token: server.token });
  });
  after(async () => {
    await server.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  test("the models have exactly the fields of the server's OpenAPI document and of the universal schema", async () => {
    const document = await (await fetch(server.url + "/v1/openapi.json", { headers: { authorization: `Bearer ${server.token}` } })).json();
    const schemas = document.components.schemas;
    for (const [name, fields] of Object.entries(FIELDS)) {
      assert.ok(schemas[name], `the server has no schema ${name}`);
      assert.deepEqual([...fields].sort(), Object.keys(schemas[name].properties ?? {}).sort(), name);
    }
    const universal = JSON.parse(readFileSync(join(ROOT, "spec", "universal-schema.json"), "utf8"));
    const definitions = universal.definitions;
    assert.deepEqual([...EVENT_FIELDS.UniversalEvent].sort(), Object.keys(universal.properties).sort());
    for (const [name, fields] of Object.entries(EVENT_FIELDS)) {
      if (name === "UniversalEvent") continue;
      assert.deepEqual([...fields].sort(), Object.keys(definitions[name].properties ?? {}).sort(), name);
    }
    const parts = Object.fromEntries(definitions.ContentPart.oneOf.map((p) => [p.properties.type.enum[0], p]));
    assert.deepEqual(Object.keys(PART_FIELDS).sort(), Object.keys(parts).sort());
    for (const [kind, fields] of Object.entries(PART_FIELDS)) {
      assert.deepEqual([...fields].sort(), Object.keys(parts[kind].properties).sort(), kind);
    }
    for (const [name, values] of Object.entries(ENUMS)) {
      assert.deepEqual([...values].sort(), [...definitions[name].enum].sort(), name);
    }
  });

  test("a streamed turn keeps its answer apart from its reasoning", async () => {
    const session = await api.createSession({ agent: "scripted", options: scripted("reasoning") });
    const pieces = new AnswerText();
    const answer = [];
    const events = [];
    const stream = session.stream("Say hello");
    for await (const event of stream) {
      events.push(event);
      const piece = pieces.feed(event);
      if (piece?.[0] === "answer") answer.push(piece[1]);
    }
    const result = await stream.result();
    assert.equal(result.status, "completed");
    assert.equal(result.turn, 1);
    assert.match(result.text, /Say hello/);
    assert.doesNotMatch(result.text, /Thinking/);
    assert.match(result.reasoning, /Thinking/);
    assert.equal(answer.join(""), result.text);
    contiguous(events);
    const stored = await session.events();
    assert.equal(stored[0].type, "session.started");
    assert.deepEqual(stored.slice(1), events);
  });

  test("a permission is approved by a callback and a question answered by a promise", async () => {
    const session = await api.createSession({ agent: "scripted", options: scripted("permission") });
    let asked = 0;
    const result = await session.send("list the files", { onPermission: () => { asked += 1; return "once"; } });
    assert.equal(result.status, "completed");
    assert.equal(asked, 1);
    assert.match(result.text, /Tool finished\./);
    assert.equal(result.events.find((e) => e.type === "permission.resolved").data.status, "approved");
    contiguous(result.events);
    const questions = await api.createSession({ agent: "scripted", options: scripted("question") });
    const answered = await questions.send("ask me", { onQuestion: async (q) => [q.options[0]] });
    assert.equal(answered.status, "completed");
    assert.match(answered.text, /You chose/);
  });

  test("cancel ends the turn cancelled and the session goes on", async () => {
    const session = await api.createSession({ agent: "scripted", options: scripted("slow", 100) });
    let started;
    const delta = new Promise((resolve) => { started = resolve; });
    const turn = session.send("go slowly", { onEvent: (e) => { if (e.type === "item.delta") started(); } });
    await delta;
    await session.cancel();
    const result = await turn;
    assert.equal(result.status, "cancelled");
    assert.equal(result.error?.code, "cancelled");
    assert.equal((await session.info()).ended, false);
  });

  test("messages back to back are queued and wait=true answers with the outcome", async () => {
    const session = await api.createSession({ agent: "scripted", options: scripted("text", 20) });
    await session.post("first");
    const outcome = await session.sendAndWait("second", 60);
    assert.equal(outcome.status, "completed");
    assert.equal(outcome.turn, 2);
    assert.match(outcome.finalText, /second/);
  });

  test("typed errors for 401, 404, 409 and 429", async () => {
    await assert.rejects(new AgentApiClient(server.url, { token: "wrong" }).sessions(),
      (e) => e instanceof Unauthorized && e.kind === "token_invalid");
    await assert.rejects(api.session("nope").info(), (e) => e instanceof NotFound && e.kind === "session_not_found");
    await api.createSession({ id: "taken", agent: "scripted" });
    await assert.rejects(api.createSession({ id: "taken", agent: "scripted" }),
      (e) => e instanceof Conflict && e.kind === "session_already_exists");
    const session = await api.createSession({ agent: "scripted", options: scripted("slow", 200) });
    for (let n = 0; n < 9; n++) await session.post(`message ${n}`);
    await assert.rejects(session.post("one too many"), (e) => e instanceof TooManyRequests && e.kind === "queue_full");
    await session.cancel();
    await session.terminate();
    await assert.rejects(session.post("after the end"), (e) => e instanceof Conflict && e.kind === "session_ended");
  });
});

describe("against a server restarted on the same SQLite store", () => {
  let directory, server, api;
  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "agent-api-ts-"));
    server = await Server.make(directory, "sqlite:" + join(directory, "store.sqlite3"));
    api = new AgentApiClient(server.url, { token: server.token, reconnectTimeoutMs: 90_000 });
  });
  after(async () => {
    await server.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  test("a stream resumes after the server is killed mid-turn, with no gap and no duplicate", async () => {
    const session = await api.createSession({ agent: "scripted", options: scripted("slow", 100) });
    let deltas = 0;
    let third;
    const seen = new Promise((resolve) => { third = resolve; });
    const turn = session.send("a long answer", { onEvent: (e) => { if (e.type === "item.delta" && ++deltas === 3) third(); } });
    await seen;
    await server.kill();
    await server.start();
    const result = await turn;
    assert.equal(result.status, "failed");
    assert.equal(result.error?.code, "interrupted");
    contiguous(result.events);
    const first = result.events[0].sequence;
    const lastSeq = result.events.at(-1).sequence;
    const stored = await session.events();
    assert.deepEqual(result.events, stored.filter((e) => e.sequence >= first && e.sequence <= lastSeq));
    const again = await session.send("and now?");
    assert.equal(again.status, "completed");
  });

  test("a session is resumed after its server restarts", async () => {
    const session = await api.createSession({ agent: "scripted", options: scripted("text") });
    assert.equal((await session.send("My name is Ada.")).status, "completed");
    await server.stop();
    await server.start();
    assert.equal((await session.info()).state, "resumable");
    assert.equal((await session.resume()).state, "live");
    const second = await session.send("What is my name?");
    assert.equal(second.status, "completed");
    assert.equal(second.turn, 2);
    const events = await session.events();
    contiguous(events);
    const seams = events.filter((e) => e.type === "item.completed" && e.data.item.content.some((p) => p.label === "session_resumed"));
    assert.equal(seams.length, 1);
    assert.equal(events.filter((e) => e.type === "session.started").length, 1);
  });
});
