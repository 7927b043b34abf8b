"""Starts a real `agent-api serve` (the scripted agent) for the tests: the binary is
`$AGENT_API_BIN`, else the workspace's `target/debug/agent-api` (clients/test.sh builds it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import List, Optional

#: The checkout (`$AGENT_API_REPO` when the tests run from a copy, as clients/test.sh runs them).
ROOT = Path(os.environ.get("AGENT_API_REPO") or Path(__file__).resolve().parents[3])


def binary() -> str:
    path = os.environ.get("AGENT_API_BIN") or str(
        Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "agent-api"
    )
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"no agent-api binary at {path}: build it (cargo build -p agent_api_cli) or set AGENT_API_BIN"
        )
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """One `agent-api serve` on 127.0.0.1 with a token, on a fixed port (so that it can be
    started again at the same address) and a store (`memory` or `sqlite:PATH`)."""

    def __init__(self, directory: Path, *, store: str = "memory", token: str = "test-token") -> None:
        self.directory = directory
        self.store = store
        self.token = token
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: Optional[subprocess.Popen[str]] = None
        self.log: List[str] = []
        token_file = directory / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        self.token_file = token_file

    def start(self) -> "Server":
        self.log = []
        command = [
            binary(), "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--store", self.store, "--token-file", str(self.token_file), "--cwd", str(self.directory),
        ]
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )
        listening = threading.Event()
        process = self.process

        def read() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                self.log.append(line.rstrip("\n"))
                if line.startswith("agent-api: listening on "):
                    listening.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not listening.wait(0.05):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("agent-api serve did not start:\n" + "\n".join(self.log))
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: the sessions stay resumable in the store."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM: a clean stop (sessions released, resumable)."""
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=60)
        self.process = None
