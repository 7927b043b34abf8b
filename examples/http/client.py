#!/usr/bin/env python3
"""A client of `agent-api serve` with the Python package `agent_api_client` (clients/python).

It creates a session on the scripted agent, streams a turn whose permission request it approves
in a callback, prints the answer (never the reasoning), reads the transcript back and terminates
the session.

    pip install clients/python
    agent-api serve --token-file TOKEN_FILE &
    AGENT_API_URL=http://127.0.0.1:2468 AGENT_API_TOKEN=… python3 examples/http/client.py

Exits non-zero when anything is off. `tests/run.sh` runs it (through `clients/test.sh`) with the
package installed from its built wheel in a fresh virtual environment.
"""

import os

from agent_api_client import Client

with Client(os.environ.get("AGENT_API_URL", "http://127.0.0.1:2468"), token=os.environ.get("AGENT_API_TOKEN")) as api:
    session = api.create_session(agent="scripted", options={"backend.scripted.scenario": "permission"})
    result = session.send(
        "list the files",
        on_event=lambda event: print(f'{event["sequence"]:>4} {event["type"]}'),
        on_permission=lambda request: print("approving:", request["action"]) or "once",
    )
    print("answer:", result.text)
    assert result.status == "completed" and "Tool finished." in result.text, result
    events = session.events()
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    session.terminate()
    print(f"python client: {len(events)} events, turn {result.turn} {result.status}")
