// Assistant text as Markdown, built as DOM nodes: a small parser of the common blocks (headings,
// lists, quotes, fenced code with its language, tables, rules, paragraphs) and inlines (code,
// strong, emphasis, links), every piece of text put in with textContent through text.js.
//
// Nothing an agent writes becomes markup: raw HTML stays text, an image is shown as its alt text
// and target (never loaded), and a link is shown with its target beside it; only an http(s) or
// mailto target is a link at all, opened by a click in a new tab without a referrer, never
// followed by itself. No innerHTML anywhere.

import { text } from "./text.js";

/** The most lines parsed as Markdown; the rest is shown as plain text (a bound on the work). */
const MAX_LINES = 5000;

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^( {0,3})([-*+])\s+(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function node(tag, cls) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  return n;
}

function textNode(s) {
  return document.createTextNode(text(s));
}

/** Renders `source` into a new element (class `md`). */
export function markdown(source) {
  const root = node("div", "md text");
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  const parsed = lines.length > MAX_LINES ? lines.slice(0, MAX_LINES) : lines;
  blocks(root, parsed);
  if (lines.length > MAX_LINES) {
    const rest = node("pre", "md-rest");
    rest.textContent = text(lines.slice(MAX_LINES).join("\n"));
    root.append(rest);
  }
  return root;
}

function isBlank(line) {
  return line.trim() === "";
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) || ORDERED.test(line) || QUOTE.test(line);
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cell = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && s[i + 1] === "|") { cell += "|"; i++; continue; }
    if (s[i] === "|") { cells.push(cell.trim()); cell = ""; continue; }
    cell += s[i];
  }
  cells.push(cell.trim());
  return cells;
}

function blocks(parent, lines) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const lang = m[2];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      const figure = node("div", "md-code");
      if (lang) {
        const label = node("span", "md-lang");
        label.textContent = text(lang);
        figure.append(label);
      }
      const pre = node("pre");
      const code = node("code");
      code.textContent = text(body.join("\n"));
      if (lang) code.dataset.lang = lang.replace(/[^A-Za-z0-9_+-]/g, "");
      pre.append(code);
      figure.append(pre);
      parent.append(figure);
      continue;
    }
    if ((m = HEADING.exec(line))) {
      const h = node("h" + Math.min(6, m[1].length + 2), "md-h");
      inline(h, m[2]);
      parent.append(h);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      parent.append(node("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { inner.push(m[1]); i++; }
      const quote = node("blockquote");
      blocks(quote, inner);
      parent.append(quote);
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      i = list(parent, lines, i);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = table(parent, lines, i);
      continue;
    }
    const para = [];
    while (i < lines.length && !isBlank(lines[i]) && !(para.length && startsBlock(lines[i]))) para.push(lines[i++]);
    const p = node("p");
    para.forEach((l, n) => {
      if (n) p.append(document.createElement("br"));
      inline(p, l.trim());
    });
    parent.append(p);
  }
}

function list(parent, lines, i) {
  const ordered = ORDERED.test(lines[i]);
  const pattern = ordered ? ORDERED : BULLET;
  const first = pattern.exec(lines[i]);
  const holder = node(ordered ? "ol" : "ul");
  if (ordered && first[2] !== "1") holder.start = Math.min(Number(first[2]), 1e9);
  let item = null;
  let body = [];
  const close = () => {
    if (!item) return;
    if (body.length === 1) inline(item, body[0]);
    else blocks(item, body);
    holder.append(item);
  };
  while (i < lines.length) {
    const line = lines[i];
    const m = pattern.exec(line);
    if (m) {
      close();
      item = node("li");
      body = [m[3]];
      i++;
      continue;
    }
    if (isBlank(line)) {
      if (i + 1 < lines.length && (pattern.test(lines[i + 1]) || /^\s{2,}\S/.test(lines[i + 1]))) { body.push(""); i++; continue; }
      break;
    }
    if (/^\s{2,}\S/.test(line)) { body.push(line.replace(/^\s{2,4}/, "")); i++; continue; }
    if (startsBlock(line)) break;
    body.push(line.trim()); // a lazy continuation
    i++;
  }
  close();
  parent.append(holder);
  return i;
}

function table(parent, lines, i) {
  const head = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : ""));
  const t = node("table", "md-table");
  const thead = node("thead");
  const tr = node("tr");
  head.forEach((cell, n) => {
    const th = node("th");
    if (aligns[n]) th.className = "align-" + aligns[n];
    inline(th, cell);
    tr.append(th);
  });
  thead.append(tr);
  t.append(thead);
  const tbody = node("tbody");
  i += 2;
  while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|")) {
    const row = node("tr");
    splitRow(lines[i]).slice(0, Math.max(head.length, 1)).forEach((cell, n) => {
      const td = node("td");
      if (aligns[n]) td.className = "align-" + aligns[n];
      inline(td, cell);
      row.append(td);
    });
    tbody.append(row);
    i++;
  }
  t.append(tbody);
  const scroll = node("div", "md-table-wrap");
  scroll.append(t);
  parent.append(scroll);
  return i;
}

/** A link target a click may open: http(s) or mailto, parsed by the browser's URL parser. */
function safeHref(target) {
  try {
    const url = new URL(target);
    return url.protocol === "http:" || url.protocol === "https:" || url.protocol === "mailto:" ? url.href : null;
  } catch {
    return null;
  }
}

/** The inlines of one line: `code`, **strong**, *emphasis*, _emphasis_, [text](target),
 * ![alt](target), backslash escapes; everything else text. Depth-bounded. */
function inline(parent, s, depth = 0) {
  let plain = "";
  const flush = () => { if (plain) { parent.append(textNode(plain)); plain = ""; } };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "\\" && i + 1 < s.length && /[\\`*_[\]()#+\-.!|>~{}<]/.test(s[i + 1])) { plain += s[i + 1]; i += 2; continue; }
    if (c === "`") {
      let ticks = 1;
      while (s[i + ticks] === "`") ticks++;
      const fence = "`".repeat(ticks);
      const end = s.indexOf(fence, i + ticks);
      if (end > 0) {
        flush();
        const code = node("code");
        code.textContent = text(s.slice(i + ticks, end).trim() || s.slice(i + ticks, end));
        parent.append(code);
        i = end + ticks;
        continue;
      }
    }
    if (depth < 8 && (c === "*" || c === "_")) {
      const strong = s[i + 1] === c;
      const mark = strong ? c + c : c;
      const end = s.indexOf(mark, i + mark.length + 1);
      const inner = end > 0 ? s.slice(i + mark.length, end) : "";
      // `_` opens only after a non-word character and closes only before one (`snake_case`,
      // `window.__x` stay text).
      const intraword = c === "_" && (/\w/.test(s[i - 1] || "") || /\w/.test(s[end + mark.length] || ""));
      if (end > 0 && inner.trim() === inner && inner && !intraword) {
        flush();
        const holder = node(strong ? "strong" : "em");
        inline(holder, inner, depth + 1);
        parent.append(holder);
        i = end + mark.length;
        continue;
      }
    }
    if (c === "[" || (c === "!" && s[i + 1] === "[")) {
      const image = c === "!";
      const open = image ? i + 1 : i;
      const close = s.indexOf("](", open);
      const end = close > 0 ? s.indexOf(")", close + 2) : -1;
      if (close > 0 && end > 0 && !s.slice(open + 1, close).includes("]")) {
        flush();
        const label = s.slice(open + 1, close);
        const target = s.slice(close + 2, end).trim().split(/\s+/)[0] || "";
        link(parent, label, target, image, depth);
        i = end + 1;
        continue;
      }
    }
    plain += c;
    i++;
  }
  flush();
}

function link(parent, label, target, image, depth) {
  const holder = node("span", image ? "md-image" : "md-link");
  if (image) {
    holder.append(textNode("image: " + (label || "untitled")));
  } else {
    const href = safeHref(target);
    if (href) {
      const a = node("a");
      a.href = href;
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
      a.referrerPolicy = "no-referrer";
      inline(a, label || target, depth + 1);
      holder.append(a);
    } else {
      const span = node("span", "md-link-text");
      inline(span, label, depth + 1);
      holder.append(span);
    }
  }
  const where = node("span", "md-target");
  where.textContent = text(" (" + target + ")");
  holder.append(where);
  parent.append(holder);
}
