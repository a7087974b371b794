// The labelling page: one item at a time, one key per answer (docs/serve.md).
// Plain JavaScript, no build step. Every change is a JSON POST carrying the CSRF token;
// the server answers with the whole new view, which is rendered at once.
"use strict";

let csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);
let view = null;
let busy = false;
window.bigsearchTimings = [];   // ms from each answer key to the next item on screen

const KEYS = { a: "positive", x: "negative", " ": "skip", Backspace: "undo" };

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  const action = KEYS[event.key];
  if (!action) return;
  event.preventDefault();
  act(action);
});
document.querySelectorAll("#answers button").forEach((b) =>
  b.addEventListener("click", () => act(b.dataset.action)));
document.addEventListener("visibilitychange", () => { if (!document.hidden && !busy) load(); });

async function act(action) {
  if (busy || !view) return;
  const item = view.item;
  let path, body;
  if (action === "undo") {
    if (!view.last) return status("nothing to undo");
    path = "/api/undo"; body = { index: view.last.index, skip: !!view.last.skip };
  } else {
    if (!item) return status("every point is labeled");
    if (action === "skip") { path = "/api/skip"; body = { index: item.index }; }
    else { path = "/api/answer"; body = { index: item.index, label: action === "positive" ? 1 : 0 }; }
  }
  const t0 = performance.now();
  setBusy(true);
  try {
    const response = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body),
    });
    const data = await response.json();
    if (response.ok) {
      render(data);
      status(done(action, item, body));
      if (action === "positive" || action === "negative") {
        requestAnimationFrame(() => window.bigsearchTimings.push(performance.now() - t0));
      }
    } else {
      if (data.state) render(data.state);
      status(data.error || `the server answered ${response.status}`, true);
    }
  } catch (err) {
    status("the server cannot be reached; your last answer was not recorded. Retrying...", true);
    retry();
  } finally {
    setBusy(false);
  }
}

function done(action, item, body) {
  if (action === "undo") return `undid the ${body.skip ? "skip" : "label"} of point ${body.index}`;
  if (action === "skip") return `skipped point ${item.index}`;
  return `recorded point ${item.index} as ${action}`;
}

async function load() {
  try {
    const response = await fetch("/api/state", { credentials: "same-origin" });
    const data = await response.json();
    if (!response.ok) return status(data.error || `the server answered ${response.status}`, true);
    csrf = data.csrf;   // a restarted server has a new one
    render(data);
    return true;
  } catch (err) {
    status("the server cannot be reached. Retrying...", true);
    return false;
  }
}

function retry() {
  setTimeout(async () => { if (await load()) status("reconnected"); else retry(); }, 1000);
}

function setBusy(value) {
  busy = value;
  document.body.dataset.busy = value ? "1" : "0";
  document.querySelectorAll("#answers button").forEach((b) => { b.disabled = value; });
}

function status(text, error) {
  const s = $("status");
  s.textContent = text;
  s.className = error ? "error" : "";
}

function render(data) {
  view = data;
  $("session").textContent = `${data.session.directory} (${data.session.method}, ${data.progress.n.toLocaleString()} points)`;
  renderItem(data.item);
  renderProgress(data.progress, data.last, data.skipped);
  document.body.dataset.index = data.item ? data.item.index : "";
  document.body.dataset.labels = data.progress.labels;
  document.body.dataset.skipped = data.skipped;
}

function renderItem(item) {
  const body = $("item-body");
  body.replaceChildren();
  if (!item) {
    $("item-title").textContent = "every point is labeled";
    $("item-meta").textContent = "";
    $("why-summary").textContent = "";
    $("why-table").tBodies[0].replaceChildren();
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
  renderWhy(item.why);
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

function renderWhy(why) {
  const tbody = $("why-table").tBodies[0];
  tbody.replaceChildren();
  $("why").hidden = !why;          // null: the method's scores have no explanation here
  if (!why) return;
  let text = `f = ${fmt(why.f)}`;
  if (why.prior !== null && why.prior !== undefined) {
    text += ` = ${fmt(why.prior)} from the prior + ${fmt(why.labeled)} from the labeled points` +
      " (a walk from this point ends at a labeled point's answer with the probability \"weight\";" +
      " positives add it to f, negatives add nothing)";
  } else {
    text += ": the labeled points' votes, weighted by similarity";
  }
  $("why-summary").textContent = why.points.length ? text : `f = ${fmt(why.f)}: no labels yet, the prior alone`;
  $("why-table").hidden = !why.points.length;
  for (const p of why.points) {
    const row = el("tr");
    const name = `point ${p.index}` + (p.id !== null && p.id !== undefined ? ` (${p.id})` : "");
    const label = el("td", p.label ? "positive" : "negative");
    label.className = p.label ? "positive" : "negative";
    row.append(el("td", name), label, el("td", fmt(p.weight)), el("td", fmt(p.contribution)));
    tbody.append(row);
  }
}

function renderProgress(p, last, skipped) {
  $("labels-used").textContent = p.budget ? `${p.labels} of ${p.budget}` : String(p.labels);
  $("positives-found").textContent = String(p.positives);
  $("skipped").textContent = String(skipped);
  $("last-label").textContent = !last ? "none" :
    `point ${last.index}: ${last.skip ? "skipped" : last.label ? "positive" : "negative"}`;
  const bar = $("budget-bar");
  bar.hidden = !p.budget;
  if (p.budget) $("budget-fill").style.width = `${Math.min(100, 100 * p.labels / p.budget)}%`;
  curve(p.curve, p.labels, p.budget);
  if (p.budget && p.labels >= p.budget) $("labels-used").textContent += " (budget reached)";
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
