#!/usr/bin/env python3
"""A client of `agent-api serve` using only Python's standard library.

It creates a session on the scripted agent, sends a message and streams the turn (SSE), answers
the permission request the turn stops on, follows the session's events from where the stream
ended until the turn completes, reads the whole transcript back by pages, and terminates the
session. Any HTTP client in any language does the same (spec/http-api.md).

    agent-api serve --no-token --store memory &
    AGENT_API_URL=http://127.0.0.1:2468 python3 examples/http/client.py

AGENT_API_TOKEN is sent as the bearer token when set. Exits non-zero when anything is off.
"""

import json
import os
import sys
import urllib.error
import urllib.request

BASE = os.environ.get("AGENT_API_URL", "http://127.0.0.1:2468").rstrip("/")
TOKEN = os.environ.get("AGENT_API_TOKEN")
SESSION = "python-example"


def request(method, path, body=None, headers=None):
    """Sends a request; returns the response (the caller reads or streams it)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if TOKEN:
        req.add_header("Authorization", "Bearer " + TOKEN)
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        return urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as error:
        problem = error.read().decode(errors="replace")
        sys.exit(f"{method} {path}: {error.code} {problem}")


def call(method, path, body=None):
    """Sends a request and returns its JSON body (None for 204)."""
    with request(method, path, body) as response:
        text = response.read()
        return json.loads(text) if text else None


def sse(response):
    """Yields (id, event) for each SSE frame until the server closes the stream."""
    event_id, data = None, []
    for raw in response:
        line = raw.decode().rstrip("\n").rstrip("\r")
        if line == "":
            if data:
                yield event_id, json.loads("\n".join(data))
            event_id, data = None, []
        elif line.startswith(":"):
            continue  # keep-alive
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


def show(event):
    """One line per event; agent text is printed as data, never interpreted."""
    kind = event["type"]
    data = event["data"]
    if kind == "item.delta":
        detail = repr(data["delta"])
    elif kind in ("item.started", "item.completed"):
        detail = f'{data["item"]["kind"]} {data["item"].get("role") or ""}'.strip()
    elif kind.startswith("permission."):
        detail = f'{data["permission_id"]} {data["status"]}: {data["action"]!r}'
    else:
        detail = ""
    print(f'{event["sequence"]:>4} {kind:<22} {detail}')


def turn_completed(event):
    item = event["data"].get("item") if event["type"] == "item.completed" else None
    return bool(item) and any(part.get("label") == "turn_completed" for part in item["content"])


def main():
    assert call("GET", "/v1/health") == {"status": "ok"}
    created = call("POST", f"/v1/sessions/{SESSION}", {
        "agent": "scripted",
        "options": {"backend.scripted.scenario": "permission", "backend.scripted.delay_ms": 0},
    })
    assert created["healthy"] is True, created

    # The turn's stream closes when the turn waits on us.
    last_id, asked = 0, None
    with request("POST", f"/v1/sessions/{SESSION}/messages/stream", {"message": "list the files"}) as stream:
        for event_id, event in sse(stream):
            show(event)
            last_id = event_id
            if event["type"] == "permission.requested":
                asked = event["data"]["permission_id"]
    assert asked, "the scripted agent asks for permission"
    assert call("POST", f"/v1/sessions/{SESSION}/permissions/{asked}/reply", {"reply": "once"}) is None

    # The rest of the turn, from where the stream ended (Last-Event-ID works the same).
    with request("GET", f"/v1/sessions/{SESSION}/events/sse?offset={last_id}") as stream:
        for event_id, event in sse(stream):
            assert event_id == last_id + 1, f"gap or duplicate: {last_id} then {event_id}"
            last_id = event_id
            show(event)
            if turn_completed(event):
                break

    # The whole transcript by pages: sequences from 1, no gap.
    events, offset = [], 0
    while True:
        page = call("GET", f"/v1/sessions/{SESSION}/events?offset={offset}&limit=5")
        events += page["events"]
        if not page["hasMore"]:
            break
        offset = events[-1]["sequence"]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert any(e["type"] == "permission.resolved" and e["data"]["status"] == "approved" for e in events)
    assert all("raw" in e and e["raw"] is None for e in events)

    assert call("POST", f"/v1/sessions/{SESSION}/terminate") is None
    info = next(s for s in call("GET", "/v1/sessions")["sessions"] if s["sessionId"] == SESSION)
    assert info["ended"] is True and info["eventCount"] == len(events) + 1, info
    print(f"python client: {len(events) + 1} events, session ended")


if __name__ == "__main__":
    main()
