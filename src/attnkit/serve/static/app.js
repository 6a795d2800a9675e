// The page's controller: asks the API (or reads the embedded payload), keeps the view state and
// redraws the grids, the zoomed map and the line view when a control changes. A captioner's
// answer draws the same grids and, instead of the zoom and the lines, one image panel per word.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { data: null, units: "pieces", heads: "all", hideSpecial: false,
                selected: { kind: null, layer: 0, head: 0 }, hiddenHeads: new Set(),
                mode: "translate", image: null };

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

// GET without a body; POST a file's bytes as they are (a Blob), anything else as JSON.
async function api(path, body) {
  const raw = body instanceof Blob;
  const res = await fetch(path, body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": raw ? (body.type || "application/octet-stream") : "application/json" },
    body: raw ? body : JSON.stringify(body),
  });
  let json = null;
  try { json = await res.json(); } catch (e) { /* not JSON: reported below */ }
  if (!res.ok) throw new Error((json && json.error) || `HTTP ${res.status}`);
  return json;
}

function showTranslation(text, nbest) {
  $("result").hidden = false;
  $("result-label").textContent = state.mode === "caption" ? "Caption" : "Translation";
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
  const captions = data.task === "caption";
  $("detail").hidden = captions;
  $("caption-view").hidden = !captions;
  $("export-png").hidden = captions;
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
  if (captions) {
    $("panels-title").textContent = `Each word's attention over the image: layer ${sel.layer + 1}, `
      + `${v.headNames[sel.head]} (each panel shaded from its least to its largest weight; hover a region)`;
    drawPanels($("panels"), $("panel-tooltip"), v, sel.layer, sel.head, state.image, data.attention.cross.grid);
    return;
  }
  $("zoom-title").textContent = `${KIND_TITLES[sel.kind]}: layer ${sel.layer + 1}, ${v.headNames[sel.head]}`;
  drawZoom($("zoom"), $("tooltip"), v, sel.layer, sel.head);
  $("lines-title").textContent = `Lines: ${KIND_TITLES[sel.kind]}, layer ${sel.layer + 1} (hover a token)`;
  drawLines($("lines"), $("legend"), v, sel.layer, state.hiddenHeads);
}

function show(data) {
  state.data = data;
  showTranslation(data.task === "caption" ? data.caption : data.translation, null);
  render();
}

// Which input the selected model reads: the text box (translation) or an image (captioner).
function setMode(mode) {
  if (mode === state.mode) return;
  state.mode = mode;
  const captions = mode === "caption";
  $("text").hidden = captions;
  $("examples").hidden = captions;
  $("image-box").hidden = !captions;
  $("translate").textContent = captions ? "Caption" : "Translate";
  $("result").hidden = $("view").hidden = true;
  state.data = null;
}

async function caption() {
  const file = $("image").files[0];
  if (!file) { setStatus("choose an image first", true); return; }
  const beam = Number($("search").value);
  const query = new URLSearchParams({ beam, nbest: Math.min(beam, 4), attention: "true" });
  if ($("model").value) query.set("model", $("model").value);
  $("translate").disabled = true;
  setStatus("captioning…");
  try {
    const answer = await api("/v1/caption?" + query, file);
    if (state.image) URL.revokeObjectURL(state.image.src);
    const url = URL.createObjectURL(file);
    state.image = await loadImage(url);
    state.data = captionPayload(answer, null);
    showTranslation(answer.caption, beam > 1 ? answer.nbest : null);
    render();
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    $("translate").disabled = false;
  }
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
  $("translate").addEventListener("click", () => (state.mode === "caption" ? caption() : translate()));
  $("model").addEventListener("change", () => setMode($("model").selectedOptions[0].dataset.task));
  const box = $("image-box");
  box.addEventListener("dragover", (e) => { e.preventDefault(); box.classList.add("over"); });
  box.addEventListener("dragleave", () => box.classList.remove("over"));
  box.addEventListener("drop", (e) => {
    e.preventDefault();
    box.classList.remove("over");
    if (!e.dataTransfer.files.length) return;
    $("image").files = e.dataTransfer.files;
    caption();
  });
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
    if (EMBEDDED.task === "caption") {
      state.mode = "caption";
      $("text").hidden = true;
      state.image = await loadImage(EMBEDDED.image);
      show(captionPayload(EMBEDDED, EMBEDDED.image));
      return;
    }
    $("text").value = EMBEDDED.text;
    $("text").readOnly = true;
    show(EMBEDDED);
    return;
  }
  try {
    const { models } = await api("/v1/models");
    models.filter((m) => m.task === "translate" || m.task === "caption").forEach((m) => {
      const o = document.createElement("option");
      o.value = m.name;
      o.dataset.task = m.task;
      o.textContent = m.task === "caption" ? `${m.name} (image captions)`
        : m.src_lang && m.tgt_lang ? `${m.name} (${m.src_lang}→${m.tgt_lang})` : m.name;
      $("model").appendChild(o);
    });
    if ($("model").options.length) setMode($("model").options[0].dataset.task);
    setStatus("ready");
  } catch (e) {
    setStatus("cannot reach the server: " + e.message, true);
  }
}

start();
