// Starts a real `agent-api serve` (the scripted agent) for the tests: the binary is
// $AGENT_API_BIN, else the workspace's target/debug/agent-api (clients/test.sh builds it).
import { spawn } from "node:child_process";
import { accessSync, constants, chmodSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

// The checkout ($AGENT_API_REPO when the tests run from a copy, as clients/test.sh runs them).
export const ROOT = process.env.AGENT_API_REPO ?? new URL("../../../", import.meta.url).pathname;

export function binary() {
  const path = process.env.AGENT_API_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(ROOT, "target"), "debug", "agent-api");
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`no agent-api binary at ${path}: build it (cargo build -p agent_api_cli) or set AGENT_API_BIN`);
  }
  return path;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** One `agent-api serve` on 127.0.0.1 with a token, a fixed port and a store. */
export class Server {
  static async make(directory, store = "memory") {
    const server = new Server(directory, store, await freePort());
    return server.start();
  }

  constructor(directory, store, port) {
    this.directory = directory;
    this.store = store;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.token = "test-token";
    this.tokenFile = join(directory, "token");
    writeFileSync(this.tokenFile, this.token + "\n");
    chmodSync(this.tokenFile, 0o600);
    this.log = [];
  }

  start() {
    this.log = [];
    const child = spawn(binary(), ["serve", "--host", "127.0.0.1", "--port", String(this.port), "--store", this.store,
      "--token-file", this.tokenFile, "--cwd", this.directory], { stdio: ["ignore", "ignore", "pipe"], detached: true });
    this.child = child;
    return new Promise((resolve, reject) => {
      let buffer = "";
      const timer = setTimeout(() => reject(new Error("agent-api serve did not start:\n" + this.log.join("\n"))), 60_000);
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (chunk) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 1);
          this.log.push(line);
          if (line.startsWith("agent-api: listening on ")) {
            clearTimeout(timer);
            resolve(this);
          }
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`agent-api serve exited (${code}):\n${this.log.join("\n")}`));
      });
    });
  }

  /** SIGKILL (a crash) or SIGTERM (a clean stop); resolves once it has exited. */
  signal(name) {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.removeAllListeners("exit");
      child.once("exit", () => resolve());
      child.kill(name);
    });
  }

  kill() { return this.signal("SIGKILL"); }
  stop() { return this.signal("SIGTERM"); }
}
