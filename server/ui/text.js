// Agent strings shown to a person: the same rule as the terminal's (agent_api::display).
//
// An agent prints what a model tells it, and a model can be steered by any file it reads. The page
// never parses an agent string as markup (every one goes in with textContent), and the characters
// that change how text is shown rather than being shown (C0 and C1 controls, DEL, bidi embeddings,
// overrides, isolates and marks, line and paragraph separators, the ANSI escape) are shown as
// visible escapes: `\e`, `\r`, `\n`, `\t`, `\x07`, `\u{202e}`. `text` keeps newlines and tabs
// (an answer's lines), `line` escapes them too (a command, a tool name, a status).

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\u2028\u2029]/;

function isUnsafe(code) {
  return code <= 0x1f || (code >= 0x7f && code <= 0x9f) || code === 0x200e || code === 0x200f || code === 0x061c ||
    (code >= 0x202a && code <= 0x202e) || (code >= 0x2066 && code <= 0x2069) || code === 0x2028 || code === 0x2029;
}

function visible(code) {
  switch (code) {
    case 0x1b: return "\\e";
    case 0x0d: return "\\r";
    case 0x0a: return "\\n";
    case 0x09: return "\\t";
    default:
      if (code <= 0x1f || code === 0x7f) return "\\x" + code.toString(16).padStart(2, "0");
      return "\\u{" + code.toString(16) + "}";
  }
}

function sanitize(s, keep) {
  s = String(s ?? "");
  if (!UNSAFE.test(s)) return s;
  let out = "";
  for (const ch of s) {
    const code = ch.codePointAt(0);
    out += isUnsafe(code) && !keep(code) ? visible(code) : ch;
  }
  return out;
}

/** Multi-line text made safe to show: newlines and tabs kept, every other control or bidi
 * character shown as an escape. */
export function text(s) {
  return sanitize(s, (code) => code === 0x0a || code === 0x09);
}

/** One line: every control or bidi character, newlines included, shown as an escape, then cut to
 * `max` characters with an ellipsis. */
export function line(s, max = 2048) {
  const clean = sanitize(s, () => false);
  return clean.length > max ? clean.slice(0, max) + "…" : clean;
}

/** A cost in US dollars as agent_api::display::usd writes it. */
export function usd(cost) {
  if (typeof cost !== "number" || !Number.isFinite(cost) || cost < 0) return "unknown";
  return cost >= 1 ? "$" + cost.toFixed(2) : "$" + cost.toFixed(4);
}

/** A byte count for a person. */
export function bytes(n) {
  if (typeof n !== "number") return "";
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

/** An element with safe text: `el("span", "cls", agentString)`. Never markup. */
export function el(tag, cls, content) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (content !== undefined && content !== null) node.textContent = line(content, 4096);
  return node;
}

/** An element holding multi-line agent text. */
export function block(tag, cls, content) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  node.textContent = text(content);
  return node;
}
