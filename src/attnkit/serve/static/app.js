// The page's controller: asks the API (or reads the embedded payload), keeps the view state and
// redraws the grids, the zoomed map and the line view when a control changes.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { data: null, units: "pieces", heads: "all", hideSpecial: false,
                selected: { kind: null, layer: 0, head: 0 }, hiddenHeads: new Set() };

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function api(path, body) {
  const res = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  let json = null;
  try { json = await res.json(); } catch (e) { /* not JSON: reported below */ }
  if (!res.ok) throw new Error((json && json.error) || `HTTP ${res.status}`);
  return json;
}

function showTranslation(text, nbest) {
  $("result").hidden = false;
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
  const views = Object.fromEntries(kinds.map((k) => [k, attentionView(data, k, state)]));
  const sel = state.selected;
  if (!views[sel.kind]) Object.assign(sel, { kind: kinds[kinds.length - 1], layer: 0, head: 0 });
  const v = views[sel.kind];
  sel.layer = Math.min(sel.layer, v.maps.length - 1);
  sel.head = Math.min(sel.head, v.maps[0].length - 1);

  $("kinds").innerHTML = "";
  kinds.forEach((k) => drawGrid($("kinds"), views[k], (kind, layer, head) => {
    Object.assign(state.selected, { kind, layer, head });
    render();
  }));
  const picked = document.querySelector(
    `.cell[data-kind="${sel.kind}"][data-layer="${sel.layer}"][data-head="${sel.head}"]`);
  if (picked) picked.classList.add("selected");
  $("zoom-title").textContent = `${KIND_TITLES[sel.kind]}: layer ${sel.layer + 1}, ${v.headNames[sel.head]}`;
  drawZoom($("zoom"), $("tooltip"), v, sel.layer, sel.head);
  $("lines-title").textContent = `Lines: ${KIND_TITLES[sel.kind]}, layer ${sel.layer + 1} (hover a token)`;
  drawLines($("lines"), $("legend"), v, sel.layer, state.hiddenHeads);
}

function show(data) {
  state.data = data;
  showTranslation(data.translation, null);
  render();
}

async function translate() {
  const text = $("text").value;
  const model = $("model").value || null;
  const beam = Number($("search").value);
  $("translate").disabled = true;
  setStatus("translating…");
  try {
    const out = await api("/v1/translate", { text, model, beam, nbest: Math.min(beam, 4) });
    const t = out.translations[0];
    showTranslation(t.text, beam > 1 ? t.nbest : null);
    if (!text.trim()) { $("view").hidden = true; setStatus(""); return; }
    setStatus("reading attention…");
    state.data = await api("/v1/attention", { text, model, beam });
    render();
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    $("translate").disabled = false;
  }
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
    state.heads = b.dataset.heads;
    state.hiddenHeads.clear();
    document.querySelectorAll("[data-heads]").forEach((x) => x.classList.toggle("on", x === b));
    render();
  }));
  $("hide-special").addEventListener("change", (e) => { state.hideSpecial = e.target.checked; render(); });
  $("export-png").addEventListener("click", () => {
    const s = state.selected;
    $("zoom").toBlob((blob) => download(`attention_${s.kind}_layer${s.layer + 1}_head${s.head + 1}.png`, blob));
  });
  $("export-json").addEventListener("click", () => {
    download("attention.json", new Blob([JSON.stringify(state.data)], { type: "application/json" }));
  });
  $("translate").addEventListener("click", translate);
  document.querySelectorAll("[data-example]").forEach((b) => b.addEventListener("click", () => {
    $("text").value = b.dataset.example;
    translate();
  }));
  $("text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate();
  });
}

async function start() {
  wireControls();
  if (EMBEDDED) { // a static file from `attnkit attention --html`: no server behind it
    document.querySelectorAll(".live-only").forEach((el) => { el.hidden = true; });
    $("text").value = EMBEDDED.text;
    $("text").readOnly = true;
    show(EMBEDDED);
    return;
  }
  try {
    const { models } = await api("/v1/models");
    models.filter((m) => m.task === "translate").forEach((m) => {
      const o = document.createElement("option");
      o.value = m.name;
      o.textContent = m.src_lang && m.tgt_lang ? `${m.name} (${m.src_lang}→${m.tgt_lang})` : m.name;
      $("model").appendChild(o);
    });
    setStatus("ready");
  } catch (e) {
    setStatus("cannot reach the server: " + e.message, true);
  }
}

start();
