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

/** Whether a code point shows as nothing, or as a plain space although it is not one
 * (agent_api::display::is_invisible): zero-width spaces and joiners, the BOM, the soft hyphen,
 * variation selectors, tag characters, Hangul fillers, every space that is not U+0020. */
export function isInvisible(code) {
  return code === 0xa0 || code === 0xad || code === 0x34f || code === 0x115f || code === 0x1160 || code === 0x1680 ||
    code === 0x180e || (code >= 0x2000 && code <= 0x200d) || code === 0x202f || (code >= 0x205f && code <= 0x2064) ||
    (code >= 0x206a && code <= 0x206f) || code === 0x3000 || code === 0x3164 || (code >= 0xfe00 && code <= 0xfe0f) ||
    code === 0xfeff || code === 0xffa0 || (code >= 0xe0000 && code <= 0xe007f) || (code >= 0xe0100 && code <= 0xe01ef);
}

/** The shortest run of spaces `command` shows by its length (agent_api::display::SPACE_RUN). */
export const SPACE_RUN = 4;

/** A command line to approve, shown so that all of it can be seen (agent_api::display::command):
 * `line`'s escapes, every invisible character as `\u{200b}`, every run of SPACE_RUN or more
 * spaces as `[N spaces]`. Never cut: the caller bounds what it shows and says so. */
export function command(s) {
  s = String(s ?? "");
  let out = "";
  let spaces = 0;
  const flush = () => {
    out += spaces >= SPACE_RUN ? "[" + spaces + " spaces]" : " ".repeat(spaces);
    spaces = 0;
  };
  for (const ch of s) {
    if (ch === " ") { spaces += 1; continue; }
    flush();
    const code = ch.codePointAt(0);
    if (isUnsafe(code)) out += visible(code);
    else if (isInvisible(code)) out += "\\u{" + code.toString(16) + "}";
    else out += ch;
  }
  flush();
  return out;
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
