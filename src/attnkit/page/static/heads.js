// The heads view: per kind, a layers x heads table of one score of every head on this sentence
// (the payload's "heads", attnkit.heads): importance (Michel et al.'s |dL/dxi_h|), confidence
// (the mean largest weight of a query) or entropy (nats). Shaded against the kind's largest value
// (confidence against 1); a click picks that head's map for the zoom and the lines.
"use strict";

function drawHeads(container, data, score, selected, onPick) {
  container.innerHTML = "";
  Object.entries(data.heads || {}).forEach(([kind, scores]) => {
    const shown = scores[score] ? score : "confidence"; // an int8 model has no gradient: no importance
    const values = scores[shown];
    const top = shown === "confidence" ? 1 : Math.max(1e-12, ...values.flat());
    const box = document.createElement("div");
    box.innerHTML = `<h2>${KIND_TITLES[kind]} <span>${shown}</span></h2>`;
    const table = document.createElement("table");
    table.dataset.kind = kind;
    const header = table.insertRow();
    header.appendChild(document.createElement("th"));
    values[0].forEach((_, h) => {
      const th = document.createElement("th");
      th.textContent = "head " + (h + 1);
      header.appendChild(th);
    });
    values.forEach((row, l) => {
      const tr = table.insertRow();
      const th = document.createElement("th");
      th.textContent = "layer " + (l + 1);
      tr.appendChild(th);
      row.forEach((v, h) => {
        const td = tr.insertCell();
        td.textContent = v < 0.001 && v > 0 ? v.toExponential(1) : v.toFixed(3);
        td.style.background = colour(0.8 * v / top);
        td.style.color = v / top > 0.55 ? "#fff" : "";
        Object.assign(td.dataset, { kind, layer: l, head: h, value: v });
        td.title = `${KIND_TITLES[kind]}, layer ${l + 1}, head ${h + 1}: ${shown} ${v}`;
        if (selected.kind === kind && selected.layer === l && selected.head === h) td.classList.add("selected");
        td.addEventListener("click", () => onPick(kind, l, h));
      });
    });
    box.appendChild(table);
    container.appendChild(box);
  });
}
