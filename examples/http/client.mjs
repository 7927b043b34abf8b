// A client of `agent-api serve` with the npm package `agent-api-client` (clients/typescript): a
// session on the scripted agent, a streamed turn whose permission it approves in a callback, the
// answer printed (never the reasoning). `tests/run.sh` runs it (through `clients/test.sh`) with the
// package installed from its `npm pack` tarball in a fresh folder.
//
//   AGENT_API_URL=http://127.0.0.1:2468 AGENT_API_TOKEN=… node examples/http/client.mjs
import { AgentApiClient } from "agent-api-client";

const api = new AgentApiClient(process.env.AGENT_API_URL ?? "http://127.0.0.1:2468", { token: process.env.AGENT_API_TOKEN });
const session = await api.createSession({ agent: "scripted", options: { "backend.scripted.scenario": "permission" } });
const result = await session.send("list the files", {
  onEvent: (event) => console.log(String(event.sequence).padStart(4), event.type),
  onPermission: async (request) => { console.log("approving:", request.action); return "once"; },
});
console.log("answer:", result.text);
if (result.status !== "completed" || !result.text.includes("Tool finished.")) throw new Error(`unexpected: ${JSON.stringify(result)}`);
await session.terminate();
