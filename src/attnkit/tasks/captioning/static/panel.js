// The captioner's panel: an image in (POST /v1/caption?attention=true), its caption out, and one
// picture per word (or piece): the image with that word's attention over the grid of regions.
// Region r covers grid cell (r / gw, r % gw) of the image as the model read it: the whole picture
// squeezed to a square, so the panels draw it square too.
"use strict";

const PANEL = 128; // each panel's side in pixels

// The caption answer with what the page's views need: a "regions" sequence (one label per
// region) beside the caption's own pieces and words, and the image it was drawn from.
function captionPayload(answer, imageUrl) {
  const [gh, gw] = answer.attention.cross.grid;
  const labels = Array.from({ length: gh * gw }, (_, r) => `region ${Math.floor(r / gw) + 1},${(r % gw) + 1}`);
  const regions = { pieces: labels, words: labels, word_of_piece: labels.map((_, r) => r) };
  // stretched: a few words over many regions; each row spread over its own least to largest
  const cross = { ...answer.attention.cross, title: "Cross-attention over the image's regions", stretched: true };
  return { ...answer, task: "caption", image: imageUrl, sequences: { ...answer.sequences, regions },
           attention: { cross } };
}

function loadImage(url) {
  const img = new Image();
  img.src = url;
  return img.decode().then(() => img);
}

// Warm where the word looks, darker where it does not; each panel's weights stretched over its own
// least to largest (heatmaps.js' stretch).
function paintRegions(ctx, weights, grid) {
  const [gh, gw] = grid;
  const cw = PANEL / gw, ch = PANEL / gh;
  stretch(weights).forEach((t, r) => {
    const x = (r % gw) * cw, y = Math.floor(r / gw) * ch;
    ctx.fillStyle = `rgba(0,0,0,${(0.55 * (1 - t)).toFixed(3)})`;
    ctx.fillRect(x, y, cw, ch);
    ctx.fillStyle = `rgba(255,${Math.round(60 + 170 * t)},0,${(0.5 * t).toFixed(3)})`;
    ctx.fillRect(x, y, cw, ch);
  });
}

// One panel per row of the view's (layer, head) map; hovering a region shows
// "word → region row,col: value" in ``tooltip`` (its dataset names the tensor's row and column).
function drawPanels(container, tooltip, view, layer, head, image, grid) {
  const map = view.maps[layer][head];
  const [gh, gw] = grid;
  container.querySelectorAll(".panel").forEach((el) => el.remove());
  map.forEach((weights, t) => {
    const fig = document.createElement("figure");
    fig.className = "panel";
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = PANEL;
    Object.assign(canvas.dataset, { row: view.rowIdx[t], layer, head, grid: `${gh}x${gw}` });
    const ctx = canvas.getContext("2d");
    ctx.drawImage(image, 0, 0, PANEL, PANEL);
    paintRegions(ctx, weights, grid);
    const label = document.createElement("figcaption");
    label.textContent = view.rowLabels[t];
    label.title = `weights ${Math.min(...weights).toFixed(3)} to ${Math.max(...weights).toFixed(3)}`;
    fig.append(canvas, label);
    container.appendChild(fig);

    canvas.onmousemove = (e) => {
      const gc = Math.floor((e.offsetX / canvas.clientWidth) * gw); // offsetX: inside the border
      const gr = Math.floor((e.offsetY / canvas.clientHeight) * gh);
      if (gc < 0 || gr < 0 || gc >= gw || gr >= gh) { tooltip.hidden = true; return; }
      const c = gr * gw + gc, w = weights[c];
      tooltip.textContent = `${view.rowLabels[t]} → ${view.colLabels[c]}: ${w.toFixed(3)}`;
      Object.assign(tooltip.dataset, { row: view.rowIdx[t], col: view.colIdx[c], value: w.toFixed(3) });
      const box = container.getBoundingClientRect();
      tooltip.style.left = (e.clientX - box.left + 14) + "px";
      tooltip.style.top = (e.clientY - box.top + 14) + "px";
      tooltip.hidden = false;
    };
    canvas.onmouseleave = () => { tooltip.hidden = true; };
  });
}

async function caption() {
  const file = $("image").files[0];
  if (!file) { setStatus("choose an image first", true); return; }
  const beam = Number($("search").value);
  const query = new URLSearchParams({ beam, nbest: Math.min(beam, 4), attention: "true" });
  if ($("model").value) query.set("model", $("model").value);
  $("go").disabled = true;
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
    $("go").disabled = false;
  }
}

registerPanel("caption", {
  inputs: ["image-box"],
  button: "Caption",
  result: "Caption",
  label: (m) => `${m.name} (image captions)`,
  run: caption,
  methods: ["rollout"],
  text: (data) => data.caption,
  embedded: async (data) => {
    state.image = await loadImage(data.image);
    return captionPayload(data, data.image);
  },
  view: "caption-view",
  draw: (v, sel, data) => {
    $("panels-title").textContent = `Each word's attention over the image: ${v.layerNames[sel.layer]}, `
      + `${v.headNames[sel.head]} (each panel shaded from its least to its largest weight; hover a region)`;
    drawPanels($("panels"), $("panel-tooltip"), v, sel.layer, sel.head, state.image, data.attention.cross.grid);
  },
  wire: () => {
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
  },
});
