// Attention views and heatmaps. A payload (POST /v1/attention) holds, per kind, weights
// [layer][head][row][col], and one rollout (or flow) map [row][col] followed down every layer; a
// *view* is what the controls make of it: raw weights or a followed map, pieces or words, each head
// or their mean or max, with or without <s> and </s>. Views keep the original indices of what they
// show, so a value on screen can be traced to the tensor.
"use strict";

const KIND_TITLES = {
  encoder_self: "Encoder self-attention",
  decoder_self: "Decoder self-attention",
  cross: "Encoder-decoder (cross) attention",
};
const SPECIAL = new Set(["<s>", "</s>"]);

// Word-level map of one (rows x cols) piece map: rows averaged over a word's pieces, columns summed.
function toWords(map, rowWord, colWord, nRows, nCols) {
  const out = Array.from({ length: nRows }, () => new Float64Array(nCols));
  const count = new Float64Array(nRows);
  map.forEach((row, r) => {
    count[rowWord[r]] += 1;
    row.forEach((w, c) => { out[rowWord[r]][colWord[c]] += w; });
  });
  return out.map((row, r) => Array.from(row, (w) => w / count[r]));
}

function attentionView(data, kind, state) {
  const spec = data.attention[kind];
  const rowSeq = data.sequences[spec.rows], colSeq = data.sequences[spec.cols];
  const words = state.units === "words";
  let rowLabels = words ? rowSeq.words : rowSeq.pieces;
  let colLabels = words ? colSeq.words : colSeq.pieces;
  const followed = state.method && state.method !== "raw" ? spec[state.method] : null;
  let layers = (followed ? [[followed]] : spec.weights).map((heads) => heads.map((m) =>
    words ? toWords(m, rowSeq.word_of_piece, colSeq.word_of_piece, rowLabels.length, colLabels.length) : m));
  let headNames = followed ? [state.method] : layers[0].map((_, h) => "head " + (h + 1));
  const layerNames = followed ? ["all layers"] : layers.map((_, l) => "layer " + (l + 1));
  const subtitle = followed ? `${state.method}: followed down every layer`
    : `${spec.layers} layers × ${spec.heads} heads`;
  if (!followed && state.heads !== "all") {
    const pick = state.heads === "max" ? Math.max : (a, b) => a + b;
    layers = layers.map((heads) => [heads[0].map((row, r) => row.map((_, c) => {
      let v = heads[0][r][c];
      for (let h = 1; h < heads.length; h++) v = pick(v, heads[h][r][c]);
      return state.heads === "mean" ? v / heads.length : v;
    }))]);
    headNames = [state.heads + " of " + spec.heads + " heads"];
  }
  let rowIdx = rowLabels.map((_, i) => i), colIdx = colLabels.map((_, i) => i);
  if (state.hideSpecial) {
    rowIdx = rowIdx.filter((i) => !SPECIAL.has(rowLabels[i]));
    colIdx = colIdx.filter((i) => !SPECIAL.has(colLabels[i]));
  }
  return {
    kind, title: spec.title || KIND_TITLES[kind], stretched: Boolean(spec.stretched),
    rowLabels: rowIdx.map((i) => rowLabels[i]), colLabels: colIdx.map((i) => colLabels[i]),
    rowIdx, colIdx, headNames, layerNames, subtitle,
    maps: layers.map((heads) => heads.map((m) => rowIdx.map((r) => colIdx.map((c) => m[r][c])))),
  };
}

// White to deep blue; weights are probabilities, so the scale is absolute (0..1) for every map.
function colour(w) {
  const t = Math.max(0, Math.min(1, w));
  const r = Math.round(255 - t * (255 - 16)), g = Math.round(255 - t * (255 - 52)), b = Math.round(255 - t * (255 - 140));
  return `rgb(${r},${g},${b})`;
}

// A row's weights spread over 0..1 (its least to its largest), as `attnkit attention --out` shades a
// caption's panels: over 64 or more image regions even a sharp look is far from 1.
function stretch(row) {
  const lo = Math.min(...row), span = Math.max(...row) - lo;
  return row.map((w) => (span > 0 ? (w - lo) / span : 0));
}

// Each cell's weight as a colour; with ``stretched``, each row spread over 0..1 first.
function paintMap(ctx, map, x0, y0, size, stretched) {
  map.forEach((row, r) => (stretched ? stretch(row) : row).forEach((w, c) => {
    ctx.fillStyle = colour(w);
    ctx.fillRect(x0 + c * size, y0 + r * size, Math.ceil(size), Math.ceil(size));
  }));
}

// The layers x heads grid of one kind: a header row of head names, then one row per layer.
function drawGrid(container, view, onPick) {
  const L = view.maps.length, H = view.maps[0].length;
  const box = document.createElement("div");
  box.className = "kind";
  box.dataset.kind = view.kind;
  box.innerHTML = `<h2>${view.title} <span>${view.subtitle}</span></h2>`;
  const grid = document.createElement("div");
  grid.className = "grid";
  grid.style.gridTemplateColumns = `56px repeat(${H}, 60px)`;
  grid.appendChild(document.createElement("span"));
  view.headNames.forEach((name) => {
    const s = document.createElement("span");
    s.className = "hl";
    s.textContent = name;
    grid.appendChild(s);
  });
  view.maps.forEach((heads, l) => {
    const label = document.createElement("span");
    label.className = "hl";
    label.textContent = view.layerNames[l];
    grid.appendChild(label);
    heads.forEach((map, h) => {
      const canvas = document.createElement("canvas");
      const n = Math.max(map.length, map[0] ? map[0].length : 0, 1);
      canvas.width = canvas.height = n * 4;
      if (view.stretched) { // a few words x many regions: filling the square shows each row
        canvas.width = Math.max(map[0] ? map[0].length : 0, 1) * 4;
        canvas.height = Math.max(map.length, 1) * 4;
      }
      canvas.className = "cell";
      Object.assign(canvas.dataset, { kind: view.kind, layer: l, head: h });
      canvas.title = `${view.title}, ${view.layerNames[l]}, ${view.headNames[h]}`;
      paintMap(canvas.getContext("2d"), map, 0, 0, 4, view.stretched);
      canvas.addEventListener("click", () => onPick(view.kind, l, h));
      grid.appendChild(canvas);
    });
  });
  box.appendChild(grid);
  container.appendChild(box);
}

// The zoomed map with its labels; hovering a cell shows "row → col: value" in #tooltip.
function drawZoom(canvas, tooltip, view, layer, head) {
  const map = view.maps[layer][head];
  const R = view.rowLabels.length, C = view.colLabels.length;
  const ctx = canvas.getContext("2d");
  ctx.font = "12px system-ui, sans-serif";
  const widest = (labels) => Math.max(20, ...labels.map((s) => ctx.measureText(s).width));
  const size = Math.max(10, Math.min(30, Math.floor(520 / Math.max(R, C, 1))));
  const left = Math.ceil(widest(view.rowLabels)) + 10, top = Math.ceil(widest(view.colLabels)) + 10;
  canvas.width = left + C * size + 4;
  canvas.height = top + R * size + 4;
  Object.assign(canvas.dataset, { left, top, size, rows: R, cols: C, kind: view.kind, layer, head });
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  paintMap(ctx, map, left, top, size);
  ctx.font = "12px system-ui, sans-serif";
  ctx.fillStyle = "#1d2330";
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  view.rowLabels.forEach((s, r) => ctx.fillText(s, left - 5, top + (r + 0.5) * size));
  ctx.save();
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "left";
  view.colLabels.forEach((s, c) => ctx.fillText(s, -top + 5, left + (c + 0.5) * size));
  ctx.restore();

  canvas.onmousemove = (e) => {
    const rect = canvas.getBoundingClientRect();
    const x = (e.clientX - rect.left) * (canvas.width / rect.width) - left;
    const y = (e.clientY - rect.top) * (canvas.height / rect.height) - top;
    const c = Math.floor(x / size), r = Math.floor(y / size);
    if (x < 0 || y < 0 || r >= R || c >= C) { tooltip.hidden = true; return; }
    const w = map[r][c];
    tooltip.textContent = `${view.rowLabels[r]} → ${view.colLabels[c]}: ${w.toFixed(3)}`;
    Object.assign(tooltip.dataset, { row: view.rowIdx[r], col: view.colIdx[c], value: w.toFixed(3) });
    tooltip.style.left = (e.clientX - rect.left + 14) + "px";
    tooltip.style.top = (e.clientY - rect.top + 14) + "px";
    tooltip.hidden = false;
  };
  canvas.onmouseleave = () => { tooltip.hidden = true; };
}
