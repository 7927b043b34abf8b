/** Server-Sent Events read from a web stream of bytes: each frame's `id` and its `data` lines. */

export interface Frame { id: string | undefined; event: string | undefined; data: string }

/** The frames of `body` (keep-alive comments skipped), until it ends. */
export async function* frames(body: ReadableStream<Uint8Array>): AsyncGenerator<Frame> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let id: string | undefined;
  let event: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.search(/\r?\n/)) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(buffer[end] === "\r" ? end + 2 : end + 1);
        if (line === "") {
          if (data.length) yield { id, event, data: data.join("\n") };
          id = undefined;
          event = undefined;
          data = [];
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (name === "id") id = value;
          else if (name === "event") event = value;
          else if (name === "data") data.push(value);
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
