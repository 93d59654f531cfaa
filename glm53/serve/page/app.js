// glm53 playground: plain script, no build step, no library. Model text always goes in as textContent.
"use strict";
const $ = (sel, root = document) => root.querySelector(sel);
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                 "#9c755f", "#bab0ac", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#17becf"];
const expertColor = (e) => PALETTE[e % PALETTE.length];
let info = null, controller = null, panes = [];

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

async function getJSON(url, options) {
  const response = await fetch(url, options);
  const body = await response.json().catch(() => ({ error: `the server answered ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `the server answered ${response.status}`);
  return body;
}

// ------------------------------------------------------------------ tabs
for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => {
    for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t === tab);
    $("#view-play").hidden = tab.dataset.view !== "play";
    $("#view-runs").hidden = tab.dataset.view !== "runs";
    if (tab.dataset.view === "runs") loadRuns();
  });
}
for (const radio of document.querySelectorAll("input[name=mode]")) {
  radio.addEventListener("change", () => {
    for (const box of document.querySelectorAll(".mode-box")) box.hidden = box.dataset.mode !== radio.value;
  });
}

// ------------------------------------------------------------------ start
async function start() {
  info = await getJSON("/api/info");
  const level = info.sandbox.level;
  const two = info.checkpoints.length > 1 ? " · two checkpoints" : "";
  $("#sandbox").textContent = `sandbox isolation: ${level}${two}`;
  $("#max_new_tokens").value = info.checkpoints[0].max_new_tokens;
  $("#max_new_tokens").max = info.bounds.max_new_tokens;
  const choice = $("#checkpoint-choice");
  info.checkpoints.forEach((c, i) => {
    const label = el("label");
    const box = el("input", { type: "checkbox", value: i, class: "use-checkpoint" });
    box.checked = true;
    label.append(box, document.createTextNode(` ${c.name} (${c.suite})`));
    choice.append(label);
  });
  for (const split of info.splits) $("#split").append(el("option", { value: split }, split));
  $("#split").addEventListener("change", loadTasks);
  $("#task").addEventListener("change", showTask);
  await loadTasks();
}

let tasks = [];
async function loadTasks() {
  const body = await getJSON(`/api/tasks?split=${encodeURIComponent($("#split").value)}`);
  tasks = body.tasks;
  $("#task").replaceChildren(...tasks.map((t) => el("option", { value: t.task_id }, t.task_id)));
  showTask();
}
function showTask() {
  const task = tasks.find((t) => t.task_id === $("#task").value);
  if (task && document.querySelector("input[name=mode]:checked").value === "task") $("#cases").value = task.cases;
}
document.querySelector("input[value=task]").addEventListener("change", showTask);

// ------------------------------------------------------------------ generation
function request() {
  const mode = document.querySelector("input[name=mode]:checked").value;
  const body = { mode, seed: Number($("#seed").value), temperature: Number($("#temperature").value),
                 max_new_tokens: Number($("#max_new_tokens").value), cases: $("#cases").value,
                 checkpoints: [...document.querySelectorAll(".use-checkpoint:checked")].map((b) => Number(b.value)) };
  if (mode === "description") {
    Object.assign(body, { description: $("#description").value, signature: $("#signature").value });
  }
  if (mode === "prompt") body.prompt = $("#prompt").value;
  if (mode === "task") Object.assign(body, { split: $("#split").value, task_id: $("#task").value });
  return body;
}

function makePanes(indices) {
  $("#panes").replaceChildren();
  panes = [];
  for (const i of indices) {
    const node = $("#pane-template").content.firstElementChild.cloneNode(true);
    node.id = `pane-${i}`;
    const c = info.checkpoints[i];
    $(".name", node).textContent = c.name;
    $(".meta", node).textContent = `${c.suite} suite · ${c.language} language · ${c.layer_pattern} · ` +
      `${c.experts} experts, top ${c.top_k} · sha256 ${c.sha256.slice(0, 12)}${c.verified ? "" : " (unverified)"}`;
    $("#panes").append(node);
    panes[i] = { node, tokens: [], text: "", prompt_ids: [], token_ids: [] };
  }
}

async function generate() {
  const body = request();
  $("#status").textContent = "";
  $("#status").classList.remove("error");
  controller = new AbortController();
  $("#generate").disabled = true;
  $("#stop").disabled = false;
  try {
    const response = await fetch("/api/generate", { method: "POST", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" }, signal: controller.signal });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      throw new Error(answer.error || `the server answered ${response.status}`);
    }
    makePanes(body.checkpoints);
    $("#status").textContent = "waiting for the model…";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) event = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (data) onEvent(event, JSON.parse(data));
      }
    }
  } catch (err) {
    if (err.name !== "AbortError") { $("#status").textContent = err.message; $("#status").classList.add("error"); }
  } finally {
    $("#generate").disabled = false;
    $("#stop").disabled = true;
    controller = null;
  }
}
$("#generate").addEventListener("click", generate);
$("#stop").addEventListener("click", () => {
  if (controller) controller.abort();
  $("#status").textContent = "stopped";
});
window.addEventListener("pagehide", () => { if (controller) controller.abort(); });

function onEvent(event, data) {
  const pane = panes[data.model];
  if (event === "start") { $("#status").textContent = `generating with ${data.name}…`; return; }
  if (event === "text") { pane.text += data.piece; $(".completion-text", pane.node).textContent = pane.text; return; }
  if (event === "token") { pane.tokens.push(data); addByte(pane, data); return; }
  if (event === "completion") return showCompletion(pane, data);
  if (event === "verdict") return showVerdict(pane, data);
  if (event === "done") { $("#status").textContent = "done"; return; }
  if (event === "error") { $("#status").textContent = data.message; $("#status").classList.add("error"); }
}

function addByte(pane, token) {
  const span = el("span", { class: "byte", title: `p = ${token.prob.toFixed(3)} · experts ` +
    token.experts.map((e, l) => `L${l}: ${e.join(",")}`).join(" ") }, token.label);
  span.style.background = `rgba(74, 139, 214, ${token.prob.toFixed(3)})`;
  if (token.prob > 0.6) span.style.color = "#fff";
  span.addEventListener("click", () => showAttention(pane, token.index, span));
  $(".bytes", pane.node).append(span);
  drawHeatmap(pane);
}

function showCompletion(pane, data) {
  pane.text = data.completion;
  pane.prompt_ids = data.prompt_ids;
  pane.token_ids = data.token_ids;
  $(".prompt-text", pane.node).textContent = data.prompt;
  $(".completion-text", pane.node).textContent = data.completion;
  const ttft = data.first_token_seconds === null ? "–" : `${(1000 * data.first_token_seconds).toFixed(0)} ms`;
  $(".stats", pane.node).textContent = `${pane.tokens.length} tokens in ${data.seconds.toFixed(2)} s ` +
    `(${(data.tokens_per_second || 0).toFixed(1)} tokens/s; first token ${ttft})` +
    (data.hit_token_cap ? " · hit the token cap" : "") +
    (data.dropped ? ` · ${data.dropped} cut by the stop rule` : "");
  drawLoad(pane);
}

function showVerdict(pane, data) {
  const box = $(".verdict", pane.node);
  box.replaceChildren();
  const badge = el("span", { class: `badge ${data.status.replace(" ", "-")}` }, data.status);
  const line = el("p");
  line.append(badge, document.createTextNode(data.total ? ` ${data.passed}/${data.total} cases passed ` +
    `(sandbox, ${data.language} level)` : ` ${data.message}`));
  box.append(line);
  if (!data.cases.length) return;
  const table = el("table");
  const head = el("tr");
  for (const h of ["args", "expected", "verdict"]) head.append(el("th", {}, h));
  table.append(head);
  for (const c of data.cases) {
    const row = el("tr", { title: c.message });
    row.append(el("td", {}, c.args), el("td", {}, c.expected), el("td", { class: `case-${c.status}` }, c.status));
    table.append(row);
  }
  box.append(table);
}

function drawHeatmap(pane) {
  const canvas = $(".heatmap", pane.node);
  const tokens = pane.tokens, layers = tokens.length ? tokens[0].experts.length : 0, cell = 12;
  canvas.width = Math.max(1, tokens.length) * cell;
  canvas.height = Math.max(1, layers) * cell;
  const ctx = canvas.getContext("2d");
  tokens.forEach((t, x) => t.experts.forEach((experts, y) => {
    ctx.fillStyle = expertColor(experts[0]);
    ctx.fillRect(x * cell, y * cell, cell - 1, cell - 1);
    if (experts.length > 1) {
      ctx.fillStyle = expertColor(experts[1]);
      ctx.fillRect(x * cell + 3, y * cell + 3, cell - 7, cell - 7);
    }
  }));
  const count = info.checkpoints[0].experts;
  const legend = $(".legend", pane.node);
  if (!legend.childElementCount) {
    for (let e = 0; e < Math.max(count, ...info.checkpoints.map((c) => c.experts)); e++) {
      const item = el("span", {}, `expert ${e}`);
      item.style.setProperty("--c", expertColor(e));
      legend.append(item);
    }
    legend.append(el("span", { class: "muted" }, "(inner square: the second routed expert)"));
  }
}

function drawLoad(pane) {
  const tokens = pane.tokens;
  if (!tokens.length) return;
  const layers = tokens[0].experts.length, experts = Math.max(...tokens.flatMap((t) => t.experts.flat())) + 1;
  const counts = Array.from({ length: layers }, () => new Array(experts).fill(0));
  for (const t of tokens) t.experts.forEach((es, l) => es.forEach((e) => counts[l][e]++));
  const canvas = $(".load", pane.node), cell = 18;
  canvas.width = experts * cell; canvas.height = layers * cell;
  const ctx = canvas.getContext("2d");
  counts.forEach((row, l) => {
    const total = row.reduce((a, b) => a + b, 0);
    row.forEach((n, e) => {
      ctx.fillStyle = `rgba(214, 51, 74, ${(n / total).toFixed(3)})`;
      ctx.fillRect(e * cell, l * cell, cell - 1, cell - 1);
    });
  });
}

async function showAttention(pane, index, span) {
  for (const s of pane.node.querySelectorAll(".byte.chosen")) s.classList.remove("chosen");
  span.classList.add("chosen");
  const box = $(".attention", pane.node);
  const ids = pane.prompt_ids.concat(pane.token_ids.slice(0, index));
  const position = ids.length - 1;
  const model = Number(pane.node.id.slice(5));
  box.replaceChildren(el("h3", {}, `Where the sparse layers looked when the model wrote byte ${index}`));
  try {
    const answer = await getJSON("/api/attention", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model, ids, position }) });
    if (!answer.layers.length) box.append(el("p", { class: "muted" }, "this model has no sparse layer"));
    for (const layer of answer.layers) {
      const row = el("div", { class: "row" });
      row.append(el("span", { class: "muted" }, `layer ${layer.layer} (${layer.selection}): `));
      const weight = new Map(layer.keys.map((k, j) => [k, layer.weights[j]]));
      ids.forEach((id, k) => {
        const label = answer.labels[k];
        const w = weight.get(k);
        const key = el("span", { class: "key", title: w === undefined ? "not attended" : `weight ${w.toFixed(3)}` }, label);
        key.style.background = w === undefined ? "#fff" : `rgba(242, 142, 43, ${Math.min(1, 0.15 + w).toFixed(3)})`;
        row.append(key);
      });
      box.append(row);
    }
  } catch (err) { box.append(el("p", { class: "error" }, err.message)); }
}

// ------------------------------------------------------------------ runs view
async function loadRuns() {
  const list = $("#runs-list");
  const body = await getJSON("/api/runs");
  list.replaceChildren(el("h3", {}, "Runs"));
  if (!body.runs.length) list.append(el("p", { class: "muted" }, body.message || "no run folders found"));
  for (const run of body.runs) {
    const button = el("button", { class: "run", "data-run": run.name }, run.name + (run.finished ? "" : " (running)"));
    button.addEventListener("click", () => showRun(run.name, button));
    list.append(button);
  }
}

async function showRun(name, button) {
  for (const b of document.querySelectorAll("#runs-list button")) b.classList.toggle("active", b === button);
  const view = $("#run-view");
  view.replaceChildren(el("p", { class: "muted" }, "loading…"));
  try {
    const run = await getJSON(`/api/runs/${encodeURIComponent(name)}`);
    view.replaceChildren(el("h2", {}, run.name));
    const curves = el("div", { class: "curves" });
    for (const c of run.curves) curves.append(curve(c));
    if (run.curves.length) view.append(el("h3", {}, "Curves"), curves);
    const report = el("div", { class: "run-report" });
    if (run.report) report.innerHTML = run.report;  // the run's own REPORT.md, rendered by the server
    else report.append(el("p", { class: "muted" }, "no REPORT.md in this run"));
    view.append(report);
    if (run.receipt) {
      const text = JSON.stringify(run.receipt.receipt, null, 1);
      view.append(el("h3", {}, run.receipt.file), el("pre", { class: "receipt" }, text));
    }
  } catch (err) { view.replaceChildren(el("p", { class: "error" }, err.message)); }
}

function curve(c) {
  const w = 300, h = 150, pad = 30, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  const xs = c.points.map((p) => p[0]), ys = c.points.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const sx = (x) => pad + (w - pad - 8) * (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5);
  const sy = (y) => h - pad + 10 - (h - pad - 10) * (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", c.points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "));
  line.setAttribute("fill", "none"); line.setAttribute("stroke", "#4e79a7"); line.setAttribute("stroke-width", "1.5");
  svg.append(line);
  const text = (x, y, s, anchor = "start") => {
    const t = document.createElementNS(ns, "text");
    for (const [k, v] of Object.entries({ x, y, "font-size": "11", "text-anchor": anchor })) t.setAttribute(k, v);
    t.textContent = s; svg.append(t);
  };
  text(pad, 12, c.name);
  text(pad - 2, sy(y1) + 4, y1.toPrecision(3), "end"); text(pad - 2, sy(y0), y0.toPrecision(3), "end");
  text(sx(x0), h - 6, `step ${x0}`); text(sx(x1), h - 6, String(x1), "end");
  if (c.points.length === 1) { const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", sx(x0)); dot.setAttribute("cy", sy(y0)); dot.setAttribute("r", 3); svg.append(dot); }
  return svg;
}

start().catch((err) => { $("#status").textContent = err.message; $("#status").classList.add("error"); });
