// The line view: attended-to tokens (columns of the map) on the left, attending tokens (rows) on
// the right, one line per (row, col, head) whose opacity is the weight and whose colour is the
// head's. Hovering a token keeps only its lines; clicking a legend entry hides or shows a head.
"use strict";

const HEAD_COLOURS = ["#2456c9", "#d1495b", "#2a9d62", "#e08a00", "#7b4bc4", "#0f9ab3", "#b3477d", "#6d7f1f",
  "#c4571c", "#4062a3", "#8a6d3b", "#3d8f8f", "#a33c3c", "#5d5fbf", "#2f7d32", "#9b5de5"];
const SVG_NS = "http://www.w3.org/2000/svg";
const MIN_WEIGHT = 0.01; // lines fainter than this are not drawn

function svgEl(name, attrs) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function drawLines(svg, legend, view, layer, hiddenHeads) {
  const heads = view.maps[layer];
  const rowH = 20, gap = 220, pad = 10;
  const measure = svgEl("text", {});
  svg.innerHTML = "";
  svg.appendChild(measure);
  const width = (labels) => Math.max(30, ...labels.map((s) => { measure.textContent = s; return measure.getComputedTextLength(); }));
  const leftW = width(view.colLabels) + pad, rightW = width(view.rowLabels) + pad;
  svg.removeChild(measure);
  const n = Math.max(view.rowLabels.length, view.colLabels.length);
  svg.setAttribute("width", leftW + gap + rightW + 2 * pad);
  svg.setAttribute("height", n * rowH + 2 * pad);
  const xL = pad + leftW, xR = pad + leftW + gap;
  const y = (i) => pad + (i + 0.5) * rowH;

  const lines = svgEl("g", {});
  svg.appendChild(lines);
  heads.forEach((map, h) => {
    if (hiddenHeads.has(h)) return;
    const stroke = heads.length === 1 ? "#1d2330" : HEAD_COLOURS[h % HEAD_COLOURS.length];
    map.forEach((row, r) => row.forEach((w, c) => {
      if (w < MIN_WEIGHT) return;
      const line = svgEl("line", { x1: xL + 4, y1: y(c), x2: xR - 4, y2: y(r), stroke, "stroke-width": 2,
        "stroke-opacity": Math.min(1, w).toFixed(3) });
      line.dataset.row = r;
      line.dataset.col = c;
      lines.appendChild(line);
    }));
  });

  const isolate = (side, i, on) => {
    for (const line of lines.children) {
      line.style.display = !on || Number(line.dataset[side]) === i ? "" : "none";
    }
  };
  const label = (text, x, i, anchor, side) => {
    const t = svgEl("text", { x, y: y(i), "text-anchor": anchor, "dominant-baseline": "middle" });
    t.textContent = text;
    t.addEventListener("mouseenter", () => { t.classList.add("active"); isolate(side, i, true); });
    t.addEventListener("mouseleave", () => { t.classList.remove("active"); isolate(side, i, false); });
    svg.appendChild(t);
  };
  view.colLabels.forEach((s, c) => label(s, xL, c, "end", "col"));
  view.rowLabels.forEach((s, r) => label(s, xR, r, "start", "row"));

  legend.innerHTML = "";
  if (heads.length > 1) {
    view.headNames.forEach((name, h) => {
      const item = document.createElement("span");
      item.innerHTML = `<i style="background:${HEAD_COLOURS[h % HEAD_COLOURS.length]}"></i>${name}`;
      item.className = hiddenHeads.has(h) ? "off" : "";
      item.addEventListener("click", () => {
        if (hiddenHeads.has(h)) hiddenHeads.delete(h); else hiddenHeads.add(h);
        drawLines(svg, legend, view, layer, hiddenHeads);
      });
      legend.appendChild(item);
    });
  }
}
