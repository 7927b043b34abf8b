// The client of the public HTTP API (spec/http-api.md): every call carries the bearer token and
// is written to the request log; the events stream is read with fetch (EventSource cannot send
// an Authorization header) and resumed from the last sequence it got.

const LOG_LIMIT = 300;

export class ApiError extends Error {
  constructor(status, problem, path) {
    const detail = problem && (problem.detail || problem.title);
    super(detail ? `${status}: ${detail}` : `HTTP ${status} on ${path}`);
    this.status = status;
    this.problem = problem;
  }
}

export class Api {
  constructor(base) {
    this.base = base;
    this.token = "";
    this.log = [];
    this.onLog = () => {};
  }

  headers(json) {
    const headers = {};
    if (this.token) headers.Authorization = "Bearer " + this.token;
    if (json) headers["Content-Type"] = "application/json";
    return headers;
  }

  record(entry) {
    this.log.push(entry);
    if (this.log.length > LOG_LIMIT) this.log.splice(0, this.log.length - LOG_LIMIT);
    this.onLog(entry);
  }

  /** One call; resolves to the parsed JSON body (null for an empty one), rejects with ApiError. */
  async call(method, path, body) {
    const started = performance.now();
    const entry = { time: new Date(), method, path, status: 0, ms: 0 };
    let response;
    try {
      response = await fetch(this.base + path, {
        method,
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (error) {
      entry.ms = Math.round(performance.now() - started);
      entry.error = String(error);
      this.record(entry);
      throw new ApiError(0, { detail: "the server cannot be reached: " + error }, path);
    }
    const textBody = await response.text();
    entry.status = response.status;
    entry.ms = Math.round(performance.now() - started);
    this.record(entry);
    let parsed = null;
    if (textBody) {
      try { parsed = JSON.parse(textBody); } catch { parsed = { detail: textBody.slice(0, 500) }; }
    }
    if (!response.ok) throw new ApiError(response.status, parsed, path);
    return parsed;
  }

  get(path) { return this.call("GET", path); }
  post(path, body) { return this.call("POST", path, body); }

  /**
   * Follows an SSE stream: `onEvent(event)` for each event, resumed after a broken connection from
   * the last sequence seen, until the session's end is seen (`finished()`) or `signal` aborts.
   * `offset()` gives the sequence to resume after. A stream the server closes before the end (it
   * stops or restarts) is resumed like a broken one; one that closes with nothing new, twice in a
   * row, is all there is (a stored session that did not end).
   */
  async follow(path, offset, onEvent, signal, onState, finished = () => false) {
    let failures = 0;
    let quiet = 0;
    while (!signal.aborted) {
      const sep = path.includes("?") ? "&" : "?";
      const url = `${path}${sep}offset=${offset()}`;
      const entry = { time: new Date(), method: "SSE", path: url, status: 0, ms: 0 };
      const started = performance.now();
      let ended = false;
      try {
        const response = await fetch(this.base + url, { headers: { ...this.headers(false), Accept: "text/event-stream" }, signal, cache: "no-store" });
        entry.status = response.status;
        this.record(entry);
        if (!response.ok) {
          let problem = null;
          try { problem = await response.json(); } catch { /* not JSON */ }
          throw new ApiError(response.status, problem, url);
        }
        onState("live");
        failures = 0;
        const before = offset();
        await readSse(response.body, onEvent);
        quiet = offset() > before ? 0 : quiet + 1;
        ended = finished() || quiet >= 2;
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 429) {
          onState("failed", error);
          return;
        }
        failures += 1;
        onState("reconnecting", error);
      } finally {
        entry.ms = Math.round(performance.now() - started);
      }
      if (ended) {
        onState("ended");
        return;
      }
      await sleep(failures ? Math.min(5000, 250 * 2 ** failures) : 100, signal);
    }
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/** Reads an SSE body: each frame's `data:` lines joined, parsed as JSON, handed to `onEvent`. */
async function readSse(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
      if (data.length === 0) continue; // a keep-alive comment
      let event;
      try { event = JSON.parse(data.join("\n")); } catch { continue; }
      onEvent(event);
    }
  }
}
