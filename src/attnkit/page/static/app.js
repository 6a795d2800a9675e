// The page's controller: keeps the view state and redraws the grids, the zoomed map and the line view
// when a control changes. What a model reads and how the API is asked are its task's panel's
// (panels.js; each task's panel.js): a panel with a view of its own draws it instead of the zoom and
// the lines (an image per word, say).
"use strict";

const $ = (id) => document.getElementById(id);
const state = { data: null, units: "pieces", heads: "all", hideSpecial: false, method: "raw",
                score: "importance", selected: { kind: null, layer: 0, head: 0 }, hiddenHeads: new Set(),
                mode: null, image: null };

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

// GET without a body; POST a file's bytes as they are (a Blob), anything else as JSON. A server
// started with API keys answers 401 without one: the page asks for it once, keeps it for this tab
// (sessionStorage) and sends it as a Bearer token from then on.
async function api(path, body, asked) {
  const raw = body instanceof Blob;
  const headers = body === undefined ? {}
    : { "Content-Type": raw ? (body.type || "application/octet-stream") : "application/json" };
  const key = sessionStorage.getItem("attnkit-api-key");
  if (key) headers.Authorization = `Bearer ${key}`;
  const res = await fetch(path, body === undefined ? { headers } : {
    method: "POST", headers, body: raw ? body : JSON.stringify(body),
  });
  if (res.status === 401 && !asked) {
    const given = window.prompt("This server needs an API key:");
    if (given) {
      sessionStorage.setItem("attnkit-api-key", given.trim());
      return api(path, body, true);
    }
  }
  let json = null;
  try { json = await res.json(); } catch (e) { /* not JSON: reported below */ }
  if (!res.ok) throw new Error((json && json.error) || `HTTP ${res.status}`);
  return json;
}

function showTranslation(text, nbest) {
  $("result").hidden = false;
  $("result-label").textContent = PANELS[state.mode].result;
  $("translation").textContent = text;
  $("nbest").innerHTML = "";
  (nbest || []).forEach((h) => {
    const li = document.createElement("li");
    li.textContent = h.text;
    const s = document.createElement("span");
    s.className = "score";
    s.textContent = h.score.toFixed(3);
    li.appendChild(s);
    $("nbest").appendChild(li);
  });
}

function render() {
  const data = state.data;
  if (!data) return;
  $("view").hidden = false;
  const kinds = Object.keys(KIND_TITLES).filter((k) => data.attention[k]);
  showMethods(data, kinds);
  const views = Object.fromEntries(kinds.map((k) => [k, attentionView(data, k, state)]));
  const panel = PANELS[state.mode];
  $("detail").hidden = Boolean(panel.view);
  Object.values(PANELS).filter((p) => p.view).forEach((p) => { $(p.view).hidden = p !== panel; });
  $("export-png").hidden = Boolean(panel.view);
  if (!views[state.selected.kind]) Object.assign(state.selected, { kind: kinds[kinds.length - 1], layer: 0, head: 0 });
  const v = views[state.selected.kind];
  // what is shown: the selection, within this view (a followed map has one layer and one head; the
  // selection itself is kept for the raw view)
  const sel = { kind: state.selected.kind, layer: Math.min(state.selected.layer, v.maps.length - 1),
                head: Math.min(state.selected.head, v.maps[0].length - 1) };

  $("kinds").innerHTML = "";
  const pick = (kind, layer, head) => {
    Object.assign(state.selected, { kind, layer, head });
    render();
  };
  kinds.forEach((k) => drawGrid($("kinds"), views[k], pick));
  $("heads-box").hidden = !data.heads;
  if (data.heads) {
    drawHeads($("heads"), data, state.score, state.selected, (kind, layer, head) => {
      setMethod("raw"); // a head's own map: the raw weights, each head apart
      setHeads("all");
      pick(kind, layer, head);
    });
  }
  const picked = document.querySelector(
    `.cell[data-kind="${sel.kind}"][data-layer="${sel.layer}"][data-head="${sel.head}"]`);
  if (picked) picked.classList.add("selected");
  if (panel.draw) {
    panel.draw(v, sel, data);
    return;
  }
  $("zoom-title").textContent = `${KIND_TITLES[sel.kind]}: ${v.layerNames[sel.layer]}, ${v.headNames[sel.head]}`;
  drawZoom($("zoom"), $("tooltip"), v, sel.layer, sel.head);
  $("lines-title").textContent = `Lines: ${KIND_TITLES[sel.kind]}, ${v.layerNames[sel.layer]} (hover a token)`;
  drawLines($("lines"), $("legend"), v, sel.layer, state.hiddenHeads);
}

// The method buttons: shown where the payload has followed maps; flow, where it is not in the
// payload, asks the server again (a static file says which command adds it).
function showMethods(data, kinds) {
  const has = (m) => kinds.some((k) => data.attention[k][m]);
  $("method-group").hidden = !has("rollout");
  const flow = document.querySelector('[data-method="flow"]');
  flow.hidden = !has("flow") && !(PANELS[state.mode].methods || []).includes("flow");
  flow.disabled = Boolean(EMBEDDED) && !has("flow");
  flow.title = flow.disabled ? "attnkit attention --html --method flow adds it" : "";
  if (state.method !== "raw" && !has(state.method)) setMethod("raw");
}

function setHeads(heads) {
  state.heads = heads;
  state.hiddenHeads.clear();
  document.querySelectorAll("[data-heads]").forEach((x) => x.classList.toggle("on", x.dataset.heads === heads));
}

function setMethod(method) {
  state.method = method;
  document.querySelectorAll("[data-method]").forEach((x) => x.classList.toggle("on", x.dataset.method === method));
}

function show(data) {
  state.data = data;
  showTranslation(PANELS[state.mode].text(data), null);
  render();
}

// What the selected model reads: its panel's inputs, the others' hidden.
function setMode(mode) {
  if (mode === state.mode) return;
  state.mode = mode;
  const inputs = new Set(PANELS[mode].inputs);
  Object.values(PANELS).forEach((p) => p.inputs.forEach((id) => { $(id).hidden = !inputs.has(id); }));
  $("go").textContent = PANELS[mode].button;
  $("result").hidden = $("view").hidden = true;
  state.data = null;
}

function download(name, blob) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

function wireControls() {
  document.querySelectorAll("[data-units]").forEach((b) => b.addEventListener("click", () => {
    state.units = b.dataset.units;
    document.querySelectorAll("[data-units]").forEach((x) => x.classList.toggle("on", x === b));
    render();
  }));
  document.querySelectorAll("[data-heads]").forEach((b) => b.addEventListener("click", () => {
    setHeads(b.dataset.heads);
    render();
  }));
  $("hide-special").addEventListener("change", (e) => { state.hideSpecial = e.target.checked; render(); });
  document.querySelectorAll("[data-method]").forEach((b) => b.addEventListener("click", () => {
    const method = b.dataset.method, before = state.method;
    const missing = state.data && !Object.values(state.data.attention).some((spec) => spec[method]);
    setMethod(method);
    if (method === "raw" || !missing || EMBEDDED || !PANELS[state.mode].follow) { render(); return; }
    PANELS[state.mode].follow(method).then(render, (e) => { // the server adds it, or says why not
      setMethod(before);
      setStatus(e.message, true);
      render();
    });
  }));
  document.querySelectorAll("[data-score]").forEach((b) => b.addEventListener("click", () => {
    state.score = b.dataset.score;
    document.querySelectorAll("[data-score]").forEach((x) => x.classList.toggle("on", x === b));
    render();
  }));
  $("export-png").addEventListener("click", () => {
    const s = state.selected;
    $("zoom").toBlob((blob) => download(`attention_${s.kind}_layer${s.layer + 1}_head${s.head + 1}.png`, blob));
  });
  $("export-json").addEventListener("click", () => {
    download("attention.json", new Blob([JSON.stringify(state.data)], { type: "application/json" }));
  });
  $("go").addEventListener("click", () => PANELS[state.mode].run());
  $("model").addEventListener("change", () => setMode($("model").selectedOptions[0].dataset.task));
  Object.values(PANELS).forEach((p) => p.wire && p.wire());
}

async function start() {
  wireControls();
  if (EMBEDDED) { // a static file from `attnkit attention --html`: no server behind it
    setMode(EMBEDDED.task);
    setMethod(EMBEDDED.method || "raw");
    document.querySelectorAll(".live-only").forEach((el) => { el.hidden = true; });
    show(await PANELS[EMBEDDED.task].embedded(EMBEDDED));
    return;
  }
  try {
    const { models } = await api("/v1/models");
    models.filter((m) => PANELS[m.task]).forEach((m) => {
      const o = document.createElement("option");
      o.value = m.name;
      o.dataset.task = m.task;
      o.textContent = PANELS[m.task].label(m);
      $("model").appendChild(o);
    });
    if ($("model").options.length) setMode($("model").options[0].dataset.task);
    setStatus("ready");
  } catch (e) {
    setStatus("cannot reach the server: " + e.message, true);
  }
}

start();
