// The labelling page: one item at a time, one key per answer, or a number typed in the
// number field when the session's method takes grades or scores (docs/serve.md).
// Plain JavaScript, no build step. Every change is a JSON POST carrying the CSRF token;
// the server answers with the whole new view, which is rendered at once.
"use strict";

let csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);
let view = null;
let busy = null;                // what is under way ("recording point 12's answer"), or null
let ignored = [];               // keys dropped while busy, said with the outcome
window.bigsearchTimings = [];   // ms from each answer key to the next item on screen
window.bigsearchStatus = [];    // every status line shown, in order (for tests)

const KEYS = { a: "positive", x: "negative", " ": "skip", Backspace: "undo" };
const NAMES = { positive: "a", negative: "x", skip: "space", undo: "backspace", number: "enter" };

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
$("number-answer").addEventListener("submit", (event) => {
  event.preventDefault();                   // Enter in the field, or the record button
  const text = $("number-input").value.trim();
  if (text === "") return status(`type ${wanted()} first, then Enter`, true);
  act("number", null, Number(text));
});
$("number-input").addEventListener("keydown", (event) => {
  if (event.key === "Escape") $("number-input").blur();      // back to the keys
});
document.addEventListener("visibilitychange", () => { if (!document.hidden && !busy) load(); });

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
  if (busy) {                 // one change at a time: a second key is dropped, aloud
    ignored.push(NAMES[action] || action);
    return status(`key ${NAMES[action] || action} ignored: still ${busy} (one key per answer)`, true);
  }
  ignored = [];
  const req = correction ? ["/api/correct", correction] : request(action, value);
  if (typeof req === "string") return status(req);
  const [path, body] = req;
  const t0 = performance.now();
  setBusy(action === "undo" ? "undoing" : correction ? `correcting point ${body.index}` :
    action === "skip" ? `skipping point ${body.index}` : `recording point ${body.index}'s answer`);
  if (action === "undo") status("undoing...");
  try {
    let [response, data] = await post(path, body);
    if (response.status === 403 && data.code === "csrf") {
      // the server restarted: a fresh token and the current state; send again only
      // when the page still shows what the key was for (the server refuses doubles)
      if (!(await load())) throw new Error("unreachable");
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
    retry({ action, body, correction });
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

function outcome(pending) {
  // what the server holds of a change whose reply was lost, read back from its state
  const { action, body, correction } = pending;
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
  try {
    const response = await fetch("/api/state", { credentials: "same-origin" });
    const data = await response.json();
    if (!response.ok) { status(data.error || `the server answered ${response.status}`, true); return false; }
    csrf = data.csrf;   // a restarted server has a new one
    render(data);
    return true;
  } catch (err) {
    status("the server cannot be reached. Retrying...", true);
    return false;
  }
}

function retry(pending) {
  setTimeout(async () => {
    if (!(await load())) {
      if (pending) status(`the server cannot be reached; will check whether the ${pending.action} of point ${pending.body.index} was recorded once it is back. Retrying...`, true);
      return retry(pending);
    }
    status(pending ? outcome(pending) : "reconnected");
  }, 1000);
}

function setBusy(what) {
  busy = what;
  document.body.dataset.busy = what ? "1" : "0";
  document.querySelectorAll("#answers button").forEach((b) => {
    b.disabled = !!what || (view && view.progress.spent && b.dataset.action !== "undo");
  });
}

function status(text, error) {
  const s = $("status");
  s.textContent = text;
  s.className = error ? "error" : "";
  window.bigsearchStatus.push(text);
}

function render(data) {
  view = data;
  $("session").textContent = `${data.session.directory} (${data.session.method}, ${data.progress.n.toLocaleString()} points)`;
  $("question").textContent = data.question || "";
  $("question").hidden = !data.question;
  renderItem(data.item, data.progress);
  renderProgress(data.progress, data.last, data.skipped);
  renderRecent(data.recent);
  document.body.dataset.index = data.item && !data.progress.spent ? data.item.index : "";
  document.body.dataset.labels = data.progress.labels;
  document.body.dataset.skipped = data.skipped;
  document.body.dataset.spent = data.progress.spent ? "1" : "0";
  renderNumberField(data);
  setBusy(busy);
}

function renderNumberField(data) {
  // the number field, for a method that takes grades (LAS, WNAS, ...) or any number (blr)
  const takes = data.session.takes;
  document.body.dataset.takes = takes;
  $("number-answer").hidden = takes === "binary" || !data.item || data.progress.spent;
  $("number-label").textContent = takes === "number" ? "your measurement / score" : "a grade in [0, 1]";
  const input = $("number-input");
  if (takes === "grade") { input.min = "0"; input.max = "1"; } else { input.removeAttribute("min"); input.removeAttribute("max"); }
}

function renderItem(item, progress) {
  const body = $("item-body");
  body.replaceChildren();
  body.hidden = !item || progress.spent;
  $("end").hidden = !progress.spent;
  if (progress.spent) {
    $("end").textContent = `Budget reached: ${progress.used} labels of ${progress.budget}` +
      ` (${progress.positives} positives found). Every answer is saved: stop the server (Ctrl-C),` +
      " or serve again with a larger --budget to go on; undo and the corrections below still work.";
  }
  if (!item || progress.spent) {
    $("item-title").textContent = item ? "budget reached" : "every point is labeled";
    $("item-meta").textContent = "";
    $("why").hidden = true;
    return;
  }
  $("item-title").textContent = `point ${item.index}` + (item.id !== null ? ` (id ${item.id})` : "");
  $("item-meta").textContent = `rank ${item.rank} · score ${fmt(item.score)}` +
    (item.impact !== undefined ? ` · impact ${fmt(item.impact)}` : "");
  const d = item.display;
  if (!d) {
    body.append(el("p", "this store keeps nothing to show for a point (ingest keeps the source's fields or pixels)"));
  } else if (d.kind === "fields") {
    const table = el("table");
    for (const [name, value] of Object.entries(d.fields)) {
      const row = el("tr");
      row.append(el("th", name), el("td", value === null ? "" : String(value)));
      table.append(row);
    }
    body.append(table);
  } else {
    body.append(image(d));
  }
  renderWhy(item.why, item.chosen_by);
}

function image(d) {
  const [h, w, c] = [d.shape[0], d.shape[1], d.shape[2] || 1];
  const canvas = document.createElement("canvas");
  canvas.width = w; canvas.height = h;
  const scale = Math.max(1, Math.floor(280 / Math.max(h, w)));
  canvas.style.width = `${w * scale}px`; canvas.style.height = `${h * scale}px`;
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
  canvas.id = "item-image";
  return canvas;
}

function renderWhy(why, chosenBy) {
  const tbody = $("why-table").tBodies[0];
  tbody.replaceChildren();
  $("why-start").hidden = !chosenBy;
  if (chosenBy) {
    const how = chosenBy.strategy === "keyword" ? "this record matches it; its matches are"
      : "the points most similar to it are";
    $("why-start").textContent = `Chosen by the session's start, ${chosenBy.source}: ${how} asked first, ` +
      "until the first positive; then the scores below choose.";
  }
  $("why").hidden = !why && !chosenBy;   // no why: the method's scores have no explanation here
  $("why-summary").hidden = !why;
  if (!why) { $("why-table").hidden = true; return; }
  const positives = why.points.some((p) => p.label > 0) || why.rest.contribution > 0;
  const las = why.prior !== null && why.prior !== undefined;
  if (!why.points.length || (las && !positives)) {
    $("why-summary").textContent = `f = ${fmt(why.f)}, all from the prior: ` +
      (why.points.length ? "no positive is labeled yet, and negatives add nothing" : "no labels yet");
    $("why-table").hidden = true;
    return;
  }
  const listed = why.points.reduce((s, p) => s + p.contribution, 0);
  const share = (v) => (why.f !== 0 ? ` (${Math.round(100 * v / why.f)}% of f)` : "");
  let text = `f = ${fmt(why.f)}: the ${why.points.length} points listed add ${fmt(listed)}${share(listed)}`;
  if (las) {
    if (why.rest.count) text += `, the ${why.rest.count} other labeled points ${fmt(why.rest.contribution)}`;
    text += `, the prior ${fmt(why.prior)}` +
      " (a walk from this point ends at a labeled point's answer with the probability \"weight\";" +
      " positives add it to f, negatives add nothing)";
  } else {
    text += ": the labeled points' votes, weighted by similarity";
  }
  $("why-summary").textContent = text;
  $("why-table").hidden = false;
  const add = (cells, cls) => {
    const row = el("tr");
    cells.forEach((c, k) => { const td = el("td", c); if (k === 1 && cls) td.className = cls; row.append(td); });
    tbody.append(row);
    return row;
  };
  for (const p of why.points) {
    const name = `point ${p.index}` + (p.id !== null && p.id !== undefined ? ` (${p.id})` : "");
    add([name, labelName(p.label), fmt(p.weight), fmt(p.contribution)], labelClass(p.label));
  }
  if (why.rest.count) add([`${why.rest.count} other labeled points`, "", "", fmt(why.rest.contribution)]).className = "rest";
  if (las) add(["the prior", "", "", fmt(why.prior)]).className = "rest";
  add(["f", "", "", fmt(why.f)]).className = "total";
}

function renderProgress(p, last, skipped) {
  $("labels-used").textContent = p.budget ? `${p.used} of ${p.budget}` : String(p.labels);
  $("mini-progress").textContent = `${p.budget ? `${p.used} of ${p.budget}` : p.labels} labels · ` +
    `${p.positives} positive${p.positives === 1 ? "" : "s"}`;
  if (p.budget && p.start_labels) $("labels-used").textContent += ` (+${p.start_labels} at the start)`;
  $("positives-found").textContent = String(p.positives);
  $("skipped").textContent = String(skipped);
  const r = p.hit_rate;
  $("hit-rate").textContent = !r ? "none yet" :
    `${r.hits} of the last ${r.of} (${Math.round(100 * r.low)}-${Math.round(100 * r.high)}%)`;
  $("last-label").textContent = !last ? "none" :
    `point ${last.index}: ${last.skip ? "skipped" : labelName(last.label)}`;
  const bar = $("budget-bar");
  bar.hidden = !p.budget;
  if (p.budget) $("budget-fill").style.width = `${Math.min(100, 100 * p.used / p.budget)}%`;
  curve(p.curve, p.labels, p.budget ? p.budget + p.start_labels : 0);
  if (p.spent) $("labels-used").textContent += " (budget reached)";
}

function renderRecent(recent) {
  const list = $("recent");
  list.replaceChildren();
  for (const d of recent) {
    const li = el("li");
    const label = el("span", labelName(d.label));
    label.className = labelClass(d.label);
    li.append(el("span", `point ${d.index}` + (d.id !== null && d.id !== undefined ? ` (${d.id})` : "") + " "), label);
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

load();
