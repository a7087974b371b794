// The labelling page: one record at a time, one key per answer, or a number typed in the
// number field when the session's method takes grades or scores (docs/serve.md).
// Plain JavaScript, no build step. Every change is a JSON POST carrying the CSRF token;
// the server answers with the whole new view, which is rendered at once. Record text is
// only ever put on the page as text nodes (highlights are <mark> elements built here),
// never as HTML.
"use strict";

let csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);

// A new record is on screen at least this long before a key or a tap answers it: a quick
// double press (a bounce, or a second press 30-250 ms after the first) would otherwise
// answer the next record after a glimpse of it. Refused keys are said in the status line.
const MIN_VIEW_MS = 400;
const PING_MS = 3000;      // how often the page checks that the server is there
const RETRY_MS = 1000;     // how often it tries again when it is not (one loop at a time)

let view = null;
let busy = null;                // what is under way ("recording point 12's answer"), or null
let ignored = [];               // keys dropped while busy, said with the outcome
let connection = "ok";          // "ok", or "lost" while the server cannot be reached
let pending = null;             // a change whose reply was lost: checked once the server is back
let shown = { index: null, at: 0 };   // the record on show and when it appeared
let readyTimer = null;
let highlight = null;           // the RegExp of the terms to mark, or null
window.bigsearchTimings = [];   // ms from each answer key to the next item on screen
window.bigsearchStatus = [];    // every status line shown, in order (for tests)
window.bigsearchReconnects = 0; // attempts to reach a lost server (one loop: about one per RETRY_MS)

const KEYS = { a: "positive", x: "negative", " ": "skip", Backspace: "undo" };
const NAMES = { positive: "a", negative: "x", skip: "space", undo: "backspace", number: "enter" };
const ANSWERS = new Set(["positive", "negative", "skip", "number"]);   // what MIN_VIEW_MS guards

document.addEventListener("keydown", (event) => {
  if (event.target instanceof Element && event.target.closest("input")) return;   // typing a number
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;   // Shift, Caps Lock: A is a
  const action = KEYS[key];
  if (!action) return;
  event.preventDefault();
  act(action);
});
document.querySelectorAll("#answers button").forEach((b) =>
  b.addEventListener("click", () => act(b.dataset.action)));
document.querySelectorAll("#tabs button").forEach((b) =>
  b.addEventListener("click", () => showTab(b.dataset.tab)));
$("btn-grade").addEventListener("click", () => {
  $("number-answer").hidden = false;
  $("btn-grade").hidden = true;
  $("number-input").focus();
});
$("number-answer").addEventListener("submit", (event) => {
  event.preventDefault();                   // Enter in the field, or the record button
  const text = $("number-input").value.trim();
  if (text === "") return status(`type ${wanted()} first, then Enter`, true);
  act("number", null, Number(text));
});
$("number-input").addEventListener("keydown", (event) => {
  const input = $("number-input");
  if (event.key === "Escape") {            // back to the keys
    input.value = "";
    input.blur();
    if (view && view.session.takes === "grade") { $("number-answer").hidden = true; $("btn-grade").hidden = false; }
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1) return;
  const action = { a: "positive", x: "negative" }[event.key.toLowerCase()];
  if (!action) return;                     // digits, the point, a sign, e: the number
  event.preventDefault();
  if (input.value === "" && !input.validity.badInput) {   // nothing typed: the key answers, as outside
    input.blur();
    return act(action);
  }
  status(`${event.key} is not part of a number: Enter records ${input.value || "what you typed"}, ` +
    "Escape clears the field and gives the keys back", true);
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && !busy && connection === "ok") load();
});

function wanted() {
  return view && view.session.takes === "number" ? "your measurement or score" : "a grade in [0, 1]";
}

function labelName(y) {
  // 1 and 0 by name; a grade or a score as the number it is
  return y === 1 ? "positive" : y === 0 ? "negative" : String(y);
}

function labelClass(y) {
  return y === 1 ? "positive" : y === 0 ? "negative" : "number";
}

function showTab(tab) {
  document.body.dataset.tab = tab;
  document.querySelectorAll("#tabs button").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.tab === tab)));
  window.scrollTo(0, 0);
}

function request(action, value) {
  // [path, body] for an action on what the page shows, or a message why there is none
  if (action === "undo") {
    if (!view.last) return "nothing to undo";
    return ["/api/undo", { index: view.last.index, skip: !!view.last.skip }];
  }
  if (!view.item) return "every point is labeled";
  if (action === "skip") return ["/api/skip", { index: view.item.index }];
  if (view.progress.spent) return "the budget is spent: undo or correct an answer, or serve again with a larger --budget";
  const label = action === "number" ? value : action === "positive" ? 1 : 0;
  return ["/api/answer", { index: view.item.index, label }];
}

async function act(action, correction, value) {
  if (!view) return;
  const name = NAMES[action] || action;
  if (connection !== "ok") {                // nothing is sent, so nothing piles up
    return status(`${correction ? "correction" : name} not sent: the server cannot be reached, so nothing was ` +
      "recorded; the page reconnects by itself", true);
  }
  if (busy) {                 // one change at a time: a second key is dropped, aloud
    ignored.push(name);
    return status(`key ${name} ignored: still ${busy} (one key per answer)`, true);
  }
  if (!correction && ANSWERS.has(action) && view.item && !view.progress.spent) {
    const age = performance.now() - shown.at;
    if (age < MIN_VIEW_MS) {
      return status(`${name} not taken: the record on show appeared ${Math.round(age)} ms ago, and a key answers ` +
        `a record from ${MIN_VIEW_MS} ms on (so a double press never answers one unseen)`, true);
    }
  }
  ignored = [];
  const req = correction ? ["/api/correct", correction] : request(action, value);
  if (typeof req === "string") return status(req);
  const [path, body] = req;
  const t0 = performance.now();
  setBusy(action === "undo" ? "undoing" : correction ? `correcting point ${body.index}` :
    action === "skip" ? `skipping point ${body.index}` : `recording point ${body.index}'s answer`);
  if (action === "undo") status("undoing...");
  if (correction) {
    status(`correcting point ${body.index} to ${labelName(body.label)}: the answers after it are told again, ` +
      "in their order...");
  }
  try {
    let [response, data] = await post(path, body);
    if (response.status === 403 && data.code === "csrf") {
      // the server restarted: a fresh token and the current state; send again only
      // when the page still shows what the key was for (the server refuses doubles)
      if ((await load()) !== true) throw new Error("unreachable");
      if (!sameTarget(action, body, correction)) {
        return status(`the server restarted; nothing was recorded for point ${body.index}: here is the current state`, true);
      }
      [response, data] = await post(path, body);
    }
    if (response.ok) {
      render(data);
      const dropped = ignored.length ? ` (${ignored.join(", ")} pressed meanwhile: ignored, one key per answer)` : "";
      status(done(action, body, correction) + dropped);
      if (action === "number" && !correction) $("number-input").value = "";   // ready for the next one
      if (action === "positive" || action === "negative" || action === "number") {
        requestAnimationFrame(() => window.bigsearchTimings.push(performance.now() - t0));
      }
    } else {
      if (data.state) render(data.state);
      status(data.error || `the server answered ${response.status}`, true);
    }
  } catch (err) {
    status(`the server cannot be reached; checking whether the ${action} of point ${body.index} was recorded...`, true);
    lost({ action, body, correction });
  } finally {
    setBusy(null);
  }
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  });
  return [response, await response.json()];
}

function sameTarget(action, body, correction) {
  if (correction) return view.recent.some((d) => d.index === body.index);
  if (action === "undo") return !!view.last && view.last.index === body.index && !!view.last.skip === body.skip;
  return !!view.item && view.item.index === body.index;
}

function done(action, body, correction) {
  if (correction) return `corrected point ${body.index} to ${labelName(body.label)}`;
  if (action === "undo") return `undid the ${body.skip ? "skip" : "label"} of point ${body.index}`;
  if (action === "skip") return `skipped point ${body.index}`;
  return `recorded point ${body.index} as ${labelName(body.label)}`;
}

function outcome(change) {
  // what the server holds of a change whose reply was lost, read back from its state
  const { action, body, correction } = change;
  const labeled = view.recent.find((d) => d.index === body.index);
  const name = labelName;
  if (action === "positive" || action === "negative" || action === "number" || correction) {
    if (labeled && labeled.label === body.label) return `reconnected: point ${body.index} is recorded as ${name(body.label)}`;
    if (labeled) return `reconnected: point ${body.index} is recorded as ${name(labeled.label)}, not ${name(body.label)}`;
    return `reconnected: your answer for point ${body.index} was not recorded; answer again`;
  }
  if (action === "skip") {
    return view.item && view.item.index === body.index ? `reconnected: the skip of point ${body.index} was not recorded`
      : `reconnected: point ${body.index} is skipped`;
  }
  const still = view.last && view.last.index === body.index && !!view.last.skip === body.skip;
  return still ? `reconnected: the undo of point ${body.index} was not recorded` : `reconnected: point ${body.index}'s ${body.skip ? "skip" : "label"} is undone`;
}

async function load() {
  // true when the state is shown; "refused" (the server said why, in the status line) or
  // "unreachable"
  try {
    const response = await fetch("/api/state", { credentials: "same-origin" });
    const data = await response.json();
    if (!response.ok) { status(data.error || `the server answered ${response.status}`, true); return "refused"; }
    csrf = data.csrf;   // a restarted server has a new one
    render(data);
    return true;
  } catch (err) {
    return "unreachable";
  }
}

// -- the connection: checked every PING_MS; while it is lost, answering is off and one
// loop tries again every RETRY_MS, then reads the state back (and what became of a change
// whose reply was lost)
function lost(change) {
  if (change) pending = change;
  if (connection === "lost") return;
  connection = "lost";
  showConnection();
  setTimeout(reconnect, RETRY_MS);
}

async function reconnect() {
  window.bigsearchReconnects += 1;
  const state = await load();
  if (state === true) {
    connection = "ok";
    showConnection();
    status(pending ? outcome(pending) : "reconnected: the server is back, answer on");
    pending = null;
    return;
  }
  if (state === "unreachable") {
    const text = pending ? `the server cannot be reached; will check whether the ${pending.action} of point ` +
      `${pending.body.index} was recorded once it is back. Retrying...`
      : "disconnected: the server cannot be reached, and answering is off until it is back. Retrying...";
    if ($("status").textContent !== text) status(text, true);    // said once, not every second
  }
  setTimeout(reconnect, RETRY_MS);
}

async function heartbeat() {
  if (connection === "ok" && !busy && !document.hidden) {
    try {
      const response = await fetch("/api/ping", { credentials: "same-origin", cache: "no-store" });
      if (!response.ok && connection === "ok") {
        const data = await response.json().catch(() => ({}));
        status(data.error || `the server answered ${response.status}`, true);
        lost(null);
      }
    } catch (err) {
      if (connection === "ok" && !busy) {
        status("disconnected: the server cannot be reached, and answering is off until it is back. Retrying...", true);
        lost(null);
      }
    }
  }
  setTimeout(heartbeat, PING_MS);
}

function showConnection() {
  const c = $("connection");
  c.dataset.state = connection;
  c.textContent = connection === "ok" ? "connected" : "disconnected: retrying";
  updateReady();
}

function setBusy(what) {
  busy = what;
  updateReady();
}

function updateReady() {
  // data-busy: "1" while the page would not take an answer key (a change under way, no
  // server, or a record on show for less than MIN_VIEW_MS); tests and benchmarks wait on it
  const age = performance.now() - shown.at;
  const young = !!(view && view.item && !view.progress.spent) && age < MIN_VIEW_MS;
  const ready = !!view && !busy && connection === "ok" && !young;
  document.body.dataset.busy = ready ? "0" : "1";
  document.body.dataset.connection = connection;
  // the buttons are off only while the server cannot be reached (or the budget is spent):
  // a tap while a change is under way is refused aloud, as a key is
  document.querySelectorAll("#answers button, #btn-record").forEach((b) => {
    b.disabled = connection !== "ok" || (!!view && view.progress.spent && b.dataset.action !== "undo");
  });
  clearTimeout(readyTimer);
  if (young) readyTimer = setTimeout(updateReady, MIN_VIEW_MS - age + 1);
}

function status(text, error) {
  const s = $("status");
  s.textContent = text;
  s.className = error ? "error" : "";
  window.bigsearchStatus.push(text);
}

// -- rendering ----------------------------------------------------------------------
function render(data) {
  view = data;
  highlight = pattern(data.highlight || []);
  $("session").textContent = `${data.session.directory} (${data.session.method}, ${data.progress.n.toLocaleString()} points)`;
  $("question").textContent = data.question || "";
  $("question").hidden = !data.question;
  renderBlind(data);
  const index = data.item && !data.progress.spent ? data.item.index : null;
  if (index !== shown.index) shown = { index, at: performance.now() };
  renderItem(data.item, data.progress);
  renderProgress(data.progress, data.last, data.skipped);
  renderRecent(data.recent);
  document.body.dataset.index = index === null ? "" : index;
  document.body.dataset.labels = data.progress.labels;
  document.body.dataset.skipped = data.skipped;
  document.body.dataset.spent = data.progress.spent ? "1" : "0";
  renderNumberField(data);
  updateReady();
}

function renderBlind(data) {
  const p = $("blind");
  p.hidden = !data.blind;
  if (!data.blind) return;
  const dir = data.session.directory;
  p.replaceChildren(
    el("strong", "Blind start: "),
    "nothing tells the search what you are looking for yet (this session has no --start-from, and no " +
    "answer is positive), so these records are about as good as any. Answer on until a first positive, " +
    "or stop the server and give what you know: ",
    el("code", `bigsearch session label ${dir} ROW 1`),
    " for a record you know is positive, or a new session with ",
    el("code", "--start-from keyword:COLUMN=WORDS"),
    " (docs/sessions.md).",
  );
}

function renderNumberField(data) {
  // the number field, for a method that takes any number (blr: always shown) or grades
  // (LAS, WNAS, ...: behind "answer with a grade instead", as most answers are 0 or 1)
  const takes = data.session.takes;
  document.body.dataset.takes = takes;
  const offered = takes !== "binary" && !!data.item && !data.progress.spent;
  const open = takes === "number" || (takes === "grade" && !$("number-answer").hidden);
  $("number-answer").hidden = !(offered && open);
  $("btn-grade").hidden = !(offered && takes === "grade" && !open);
  $("number-label").textContent = takes === "number" ? "your measurement / score" : "a grade in [0, 1]";
  const input = $("number-input");
  if (takes === "grade") { input.min = "0"; input.max = "1"; } else { input.removeAttribute("min"); input.removeAttribute("max"); }
}

function ordinal(k) {
  const s = { 1: "st", 2: "nd", 3: "rd" }[k % 100 > 10 && k % 100 < 14 ? 0 : k % 10] || "th";
  return `${k}${s}`;
}

function renderItem(item, progress) {
  const body = $("item-body");
  body.replaceChildren();
  body.hidden = !item || progress.spent;
  $("end").hidden = !progress.spent;
  if (progress.spent) {
    $("end").textContent = `Budget reached: ${progress.used} labels of ${progress.budget}` +
      ` (${progress.positives} positives found). Every answer is saved: stop the server (Ctrl-C),` +
      " or serve again with a larger --budget to go on; undo and the corrections still work.";
  }
  if (!item || progress.spent) {
    $("item-title").textContent = item ? "budget reached" : "every point is labeled";
    $("item-meta").textContent = "";
    $("why").hidden = true;
    return;
  }
  const d = item.display;
  const unlabeled = (progress.n - progress.labels).toLocaleString();
  const choice = item.chosen_by ? "asked first by the session's start" : item.rank === 1
    ? `the search's first choice of the ${unlabeled} unlabeled`
    : `the search's ${ordinal(item.rank)} choice of the ${unlabeled} unlabeled (you skipped the ones before it)`;
  $("item-meta").textContent = `row ${item.index} of the store` +
    (item.id !== null && item.id !== undefined ? ` · id ${item.id} in the source` : "") + ` · ${choice}`;
  const title = $("item-title");
  if (d && d.kind === "fields" && d.document) {
    const text = value(d.fields[d.document.title]);
    title.replaceChildren(marked(text || "(no title)"));
    body.append(documentView(d));
  } else {
    title.textContent = d && d.kind === "image" ? `Image at row ${item.index}` : `Record at row ${item.index}`;
    if (!d) {
      body.append(el("p", "this store keeps nothing to show for a point (ingest keeps the source's fields or pixels)"));
    } else if (d.kind === "fields") {
      body.append(fieldsTable(d.fields));
    } else {
      body.append(image(d));
    }
  }
  renderWhy(item);
}

function value(v) {
  if (v === null || v === undefined) return "";
  return String(v).trim();
}

function fieldsTable(fields) {
  const table = el("table");
  for (const [name, v] of Object.entries(fields)) {
    const row = el("tr");
    const td = el("td");
    td.append(marked(value(v)));
    row.append(el("th", name), td);
    table.append(row);
  }
  return table;
}

function split(text) {
  // a list in one field: "a; b; c" (or one per line, or with |), else "a, b, c"
  const parts = /[;|\n]/.test(text) ? text.split(/\s*[;|\n]\s*/) : text.split(/\s*,\s*/);
  return parts.map((p) => p.trim()).filter((p) => p);
}

// The labels of a structured abstract ("BACKGROUND:", "Methods:"), where a paragraph starts
const SECTION = /(^|[.!?)]\s+)((?:[A-Z][A-Z&/ -]{2,38}[A-Z]|Background|Objectives?|Aims?|Purpose|Introduction|Methods?|Design|Setting|Participants|Patients|Interventions?|Measurements|Results?|Findings|Conclusions?|Interpretation|Discussion|Context|Limitations|Significance)\s*:)\s+/g;

function paragraphs(text) {
  // [[label or null, text]]: the abstract's own paragraphs, and one per structured section
  const out = [];
  for (const block of text.split(/\r?\n\s*\r?\n|\r?\n/).map((b) => b.trim()).filter((b) => b)) {
    let last = 0, label = null;
    for (const m of block.matchAll(SECTION)) {
      const start = m.index + m[1].length;
      const before = block.slice(last, start).trim();
      if (before || label) out.push([label, before]);
      label = m[2];
      last = m.index + m[0].length;
    }
    out.push([label, block.slice(last).trim()]);
  }
  return out;
}

function documentView(d) {
  // title (the heading above), authors, venue and year, DOI, keywords, the abstract in
  // paragraphs; the record's other fields behind "other fields"
  const f = d.fields, r = d.document;
  const get = (role) => (r[role] !== undefined ? value(f[r[role]]) : "");
  const art = el("article");
  art.className = "document";
  const authors = get("authors") ? split(get("authors")) : [];
  if (authors.length) {
    const shown = authors.length > 6 ? `${authors.slice(0, 6).join(", ")} and ${authors.length - 6} more` : authors.join(", ");
    const p = el("p", shown);
    p.className = "byline";
    p.title = authors.join("; ");
    art.append(p);
  }
  const source = [get("venue"), get("year").replace(/\.0$/, "")].filter((s) => s);
  const doi = get("doi").replace(/^(https?:\/\/(dx\.)?doi\.org\/|doi:\s*)/i, "");
  if (source.length || doi) {
    const p = el("p");
    p.className = "source";
    p.append(source.join(", "));
    if (/^10\.\d{4,9}\/\S+$/.test(doi)) {
      const a = el("a", `doi:${doi}`);
      a.href = `https://doi.org/${encodeURI(doi)}`;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      p.append(source.length ? " · " : "", a);
    } else if (doi) {
      p.append(source.length ? " · " : "", `doi:${doi}`);
    }
    art.append(p);
  }
  const keywords = get("keywords") ? split(get("keywords")) : [];
  if (keywords.length) {
    const ul = el("ul");
    ul.className = "keywords";
    ul.setAttribute("aria-label", "keywords");
    for (const k of keywords) { const li = el("li"); li.append(marked(k)); ul.append(li); }
    art.append(ul);
  }
  const abstract = el("div");
  abstract.className = "abstract";
  const text = get("abstract");
  if (!text) {
    const p = el("p", r.abstract === undefined ? "(no abstract in this record)" : "(the abstract is empty)");
    p.className = "no-abstract";
    abstract.append(p);
  }
  for (const [label, part] of text ? paragraphs(text) : []) {
    const p = el("p");
    if (label) p.append(el("strong", label), " ");
    p.append(marked(part));
    abstract.append(p);
  }
  art.append(abstract);
  const used = new Set(Object.values(r));
  const others = Object.fromEntries(Object.entries(f).filter(([k]) => !used.has(k)));
  if (Object.keys(others).length) {
    const details = el("details");
    details.append(el("summary", `other fields (${Object.keys(others).length})`), fieldsTable(others));
    art.append(details);
  }
  return art;
}

function pattern(terms) {
  // one RegExp for the terms to mark: whole words, any case; a trailing * for any ending
  const parts = terms.map((t) => {
    const wild = t.endsWith("*");
    const core = t.replace(/\*+$/, "").trim();
    if (!core) return null;
    const escaped = core.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/\s+/g, "\\s+");
    return escaped + (wild ? "[\\p{L}\\p{N}]*" : "");
  }).filter((p) => p);
  return parts.length ? new RegExp(`(?<![\\p{L}\\p{N}])(?:${parts.join("|")})(?![\\p{L}\\p{N}])`, "giu") : null;
}

function marked(text) {
  // text as text nodes, with the highlighted terms in <mark> elements
  const out = document.createDocumentFragment();
  if (!highlight || !text) { out.append(text); return out; }
  let last = 0;
  for (const m of text.matchAll(highlight)) {
    if (!m[0]) continue;
    out.append(text.slice(last, m.index), el("mark", m[0]));
    last = m.index + m[0].length;
  }
  out.append(text.slice(last));
  return out;
}

function image(d, thumb) {
  const [h, w, c] = [d.shape[0], d.shape[1], d.shape[2] || 1];
  const canvas = document.createElement("canvas");
  canvas.width = w; canvas.height = h;
  if (thumb) {
    canvas.className = "thumb";
  } else {
    const scale = Math.max(1, Math.floor(280 / Math.max(h, w)));
    canvas.style.width = `${w * scale}px`; canvas.style.height = `${h * scale}px`;
    canvas.id = "item-image";
  }
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(w, h);
  const [lo, hi] = d.range;
  const span = hi > lo ? hi - lo : 1;
  for (let p = 0; p < h * w; p++) {
    for (let k = 0; k < 3; k++) {
      const v = d.pixels[p * c + (c === 1 ? 0 : k)];
      img.data[4 * p + k] = Math.round(255 * (v - lo) / span);
    }
    img.data[4 * p + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  return canvas;
}

function recordLine(p) {
  // a labeled record as a reader knows it: its summary (title, first fields, a small
  // image), else its row and id
  const span = el("span");
  span.className = "what";
  const s = p.summary;
  if (s && s.text) span.append(marked(s.text));
  else if (s && s.image) span.append(image(s.image, true), ` row ${p.index}`);
  else span.append(`row ${p.index}` + (p.id !== null && p.id !== undefined ? ` (id ${p.id})` : ""));
  return span;
}

function renderWhy(item) {
  const why = item.why, chosenBy = item.chosen_by;
  $("why-start").hidden = !chosenBy;
  if (chosenBy) {
    const how = chosenBy.strategy === "keyword" ? "this record matches it; its matches are"
      : "the records most like it are";
    $("why-start").textContent = `Chosen by the session's start, ${chosenBy.source}: ${how} asked first, ` +
      "until the first positive; then your answers choose.";
  }
  $("why").hidden = !why && !chosenBy;   // no why: the method's scores have no explanation here
  for (const id of ["why-plain", "why-list", "why-also", "why-also-list", "why-details"]) $(id).hidden = !why;
  $("why-list").replaceChildren();
  $("why-also-list").replaceChildren();
  if (!why) return;
  const las = why.prior !== null && why.prior !== undefined;
  const answered = why.points.length + why.rest.count;
  const positives = why.points.filter((p) => p.label >= 0.5 && p.contribution > 0);
  const listed = positives.reduce((s, p) => s + p.contribution, 0);
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  let plain;
  if (!answered) {
    plain = "No answers yet: every record has the same score, so this one is as good a start as any.";
  } else if (!positives.length) {
    plain = view.progress.positives
      ? "None of the records you marked positive is much like this one: the search is trying records unlike " +
        "the ones you marked negative."
      : "No answer is positive yet: the search is trying the records least like the ones you marked negative.";
  } else {
    plain = `Like ${plural(positives.length, "record")} you marked positive:`;
    for (const p of positives) {
      const li = el("li");
      li.append(recordLine(p));
      $("why-list").append(li);
    }
  }
  let share = "";
  if (las && positives.length && why.f > 0 && listed / why.f < 0.5) {
    share = ` Together they make ${Math.round(100 * listed / why.f)}% of its score; the rest comes from ` +
      (why.rest.count ? `${plural(why.rest.count, "other answer")}, each a little, and ` : "") +
      "the search's starting guess for every record.";
  }
  $("why-plain").textContent = plain;
  // the negatives it is most like: as like it as the positives listed (they lower its score)
  const top = Math.max(0, ...positives.map((p) => Math.abs(p.weight)));
  const alike = positives.length ? (why.negatives || []).filter((p) => Math.abs(p.weight) >= 0.5 * top && p.weight !== 0) : [];
  $("why-also").hidden = !alike.length && !share;
  $("why-also").textContent = share.trim() + (alike.length ? `${share ? " " : ""}It is also like ` +
    `${plural(alike.length, "record")} you marked negative, which lower its score:` : "");
  $("why-also-list").hidden = !alike.length;
  for (const p of alike) {
    const li = el("li");
    li.append(recordLine(p));
    $("why-also-list").append(li);
  }
  renderNumbers(item, why, las);
}

function renderNumbers(item, why, las) {
  // the numbers behind it, in the details: f as a sum over the answers
  const tbody = $("why-table").tBodies[0];
  tbody.replaceChildren();
  $("why-score").textContent = `Its score: ${fmt(item.score)} (rank ${item.rank} among the unlabeled` +
    (item.impact !== undefined ? `; impact ${fmt(item.impact)}` : "") + "). " +
    (las ? "f, LAS's estimate that it is positive, is a sum over your answers:"
      : "f, WNAS's vote, is a sum over your answers:");
  const positives = why.points.some((p) => p.label > 0) || why.rest.contribution > 0;
  if (!why.points.length || (las && !positives)) {
    $("why-summary").textContent = `f = ${fmt(why.f)}, all from the prior: ` +
      (why.points.length ? "no positive is labeled yet, and negatives add nothing" : "no labels yet");
    $("why-table").hidden = true;
    return;
  }
  const listed = why.points.reduce((s, p) => s + p.contribution, 0);
  const share = (v) => (why.f !== 0 ? ` (${Math.round(100 * v / why.f)}% of f)` : "");
  let text = `f = ${fmt(why.f)}: the ${why.points.length} answers listed add ${fmt(listed)}${share(listed)}`;
  if (las) {
    if (why.rest.count) text += `, the ${why.rest.count} other answers ${fmt(why.rest.contribution)}`;
    text += `, the prior ${fmt(why.prior)}. Weight: the probability that a random walk from this record ends ` +
      "at that answer; a positive adds its weight to f, a negative nothing (it takes walks away from the rest).";
  } else {
    text += ": the answers' votes, weighted by similarity.";
  }
  $("why-summary").textContent = text;
  $("why-table").hidden = false;
  const add = (first, cells, cls) => {
    const row = el("tr");
    const td = el("td");
    td.append(first);
    row.append(td);
    cells.forEach((c, k) => { const cell = el("td", c); if (k === 0 && cls) cell.className = cls; row.append(cell); });
    tbody.append(row);
    return row;
  };
  for (const p of why.points) {
    const s = p.summary && p.summary.text;
    add(`row ${p.index}` + (s ? `: ${s}` : ""), [labelName(p.label), fmt(p.weight), fmt(p.contribution)],
      labelClass(p.label));
  }
  if (why.rest.count) add(`${why.rest.count} other answers`, ["", "", fmt(why.rest.contribution)]).className = "rest";
  if (las) add("the prior", ["", "", fmt(why.prior)]).className = "rest";
  add("f", ["", "", fmt(why.f)]).className = "total";
}

function renderProgress(p, last, skipped) {
  $("labels-used").textContent = p.budget ? `${p.used} of ${p.budget}` : String(p.labels);
  $("mini-progress").textContent = `${p.budget ? `${p.used} of ${p.budget}` : p.labels} labels · ` +
    `${p.positives} positive${p.positives === 1 ? "" : "s"}`;
  if (p.budget && p.start_labels) $("labels-used").textContent += ` (+${p.start_labels} at the start)`;
  $("positives-found").textContent = String(p.positives);
  $("skipped").textContent = String(skipped);
  const r = p.hit_rate;
  const rate = $("hit-rate");
  if (!r) {
    rate.textContent = "none yet";
  } else {
    const range = el("span", `(${Math.round(100 * r.low)}\u2013${Math.round(100 * r.high)}%)`);
    range.className = "nowrap";
    range.title = "95% range";
    rate.replaceChildren(`${r.hits} of the last ${r.of} `, range);
  }
  renderRecall(p.recall);
  $("last-label").textContent = !last ? "none" :
    `point ${last.index}: ${last.skip ? "skipped" : labelName(last.label)}`;
  const bar = $("budget-bar");
  bar.hidden = !p.budget;
  if (p.budget) $("budget-fill").style.width = `${Math.min(100, 100 * p.used / p.budget)}%`;
  curve(p.curve, p.labels, p.budget ? p.budget + p.start_labels : 0);
  if (p.spent) $("labels-used").textContent += " (budget reached)";
  $("tab-decisions-count").textContent = p.labels ? `(${p.labels})` : "";
}

function renderRecall(r) {
  // engine/guidance/stopping.py: the recall reached with its 95% range, and the stopping rule
  const out = $("recall");
  if (!r || r.recall === null) {
    out.textContent = "not estimated yet (after 100 records read)";
  } else {
    const pct = (v) => `${(100 * v).toFixed(1)}%`;
    const range = el("span", `(${pct(r.recall_low)}\u2013${pct(r.recall_high)})`);
    range.className = "nowrap";
    range.title = "95% range";
    out.replaceChildren(`${pct(r.recall)} `, range);
  }
  document.body.dataset.stop = r && r.stop ? "1" : "0";
  if (r && r.target !== null && r.target !== undefined) {
    const rule = el("span", r.stop ? ` \u2014 stop: ${Math.round(100 * r.target)}% reached with 95% confidence`
      : ` (stop at ${Math.round(100 * r.target)}%)`);
    rule.className = r.stop ? "stop-met" : "stop-rule";
    out.append(rule);
    if (r.stop && r.basis !== "sample") {
      // the rule's misses in its calibration: relevant records of a kind the search had not met
      const check = el("span", "; check it with a random sample");
      check.className = "stop-check";
      check.title = "The rule models the hits found, and cannot see relevant records of a kind the search " +
        "has not met: label a random sample of the records not read to check the stop " +
        "(bigsearch session sample DIR -m 300; docs/screening.md)";
      out.append(check);
    }
  }
}

function renderRecent(recent) {
  const list = $("recent");
  list.replaceChildren();
  for (const d of recent) {
    const li = el("li");
    li.dataset.index = d.index;
    li.title = `row ${d.index} of the store` + (d.id !== null && d.id !== undefined ? `, id ${d.id}` : "");
    const label = el("span", labelName(d.label));
    label.className = `tag ${labelClass(d.label)}`;
    li.append(label, recordLine(d));
    if (d.was !== undefined) {
      const was = el("span", `corrected from ${labelName(d.was)}`);
      was.className = "was";
      li.append(was, " ");
    }
    if (d.label === 0 || d.label === 1) {
      const fix = el("button", `make ${d.label ? "negative" : "positive"}`);
      fix.dataset.index = d.index;
      fix.addEventListener("click", () => act(d.label ? "negative" : "positive", { index: d.index, label: 1 - d.label }));
      li.append(fix);
    }
    if (view.session.takes !== "binary") {
      const change = el("button", "change");
      change.className = "change";
      change.addEventListener("click", () => changeRecent(li, d));
      li.append(change);
    }
    list.append(li);
  }
  $("recent-none").hidden = recent.length > 0;
}

function changeRecent(li, d) {
  // a new number for a recent decision, in place: Enter records the correction, Escape cancels
  const form = el("form");
  form.noValidate = true;
  form.className = "change-form";
  const input = el("input");
  input.type = "number";
  input.step = "any";
  input.value = String(d.label);
  input.setAttribute("aria-label", `new answer for point ${d.index}`);
  const save = el("button", "save");
  save.type = "submit";
  form.append(input, save);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim() === "") return status(`type ${wanted()} for point ${d.index} first`, true);
    act("number", { index: d.index, label: Number(input.value) });
  });
  input.addEventListener("keydown", (event) => { if (event.key === "Escape") renderRecent(view.recent); });
  li.querySelectorAll("button").forEach((b) => b.remove());
  li.append(form);
  input.focus();
  input.select();
}

function curve(hits, labels, budget) {
  // positives found against labels used, drawn as an inline SVG polyline
  const svg = $("curve");
  const W = 300, H = 200, L = 34, B = 24, T = 8, R = 8;
  const xmax = Math.max(budget || 0, labels, 10);
  const ymax = Math.max(hits.length ? hits[hits.length - 1][1] : 0, 5);
  const x = (t) => L + (W - L - R) * t / xmax;
  const y = (v) => H - B - (H - B - T) * v / ymax;
  const ns = "http://www.w3.org/2000/svg";
  const node = (name, attrs, text) => {
    const e = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const points = [[0, 0], ...hits].map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
  svg.replaceChildren(
    node("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }),
    node("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
    node("polyline", { points: points.join(" "), class: "line" }),
    node("text", { x: L, y: H - 6 }, "0"),
    node("text", { x: W - R, y: H - 6, "text-anchor": "end" }, `${xmax} labels`),
    node("text", { x: L - 4, y: T + 8, "text-anchor": "end" }, String(ymax)),
    node("text", { x: L + 6, y: T + 10 }, "positives found"),
  );
}

function el(name, text) {
  const e = document.createElement(name);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e4) ? v.toExponential(3) : v.toFixed(4);
}

load().then((state) => {
  if (state !== true) lost(null);
  setTimeout(heartbeat, PING_MS);
});
