// Translation's panel: a sentence in, its translation and every attention map of it out
// (POST /v1/translate, then POST /v1/attention for the maps), drawn as grids, a zoom and lines.
"use strict";

async function translate() {
  const text = $("text").value;
  const model = $("model").value || null;
  const beam = Number($("search").value);
  $("go").disabled = true;
  setStatus("translating…");
  try {
    const out = await api("/v1/translate", { text, model, beam, nbest: Math.min(beam, 4) });
    const t = out.translations[0];
    showTranslation(t.text, beam > 1 ? t.nbest : null);
    if (!text.trim()) { $("view").hidden = true; setStatus(""); return; }
    setStatus("reading attention…");
    state.data = await api("/v1/attention", { text, model, beam, flow: state.method === "flow" });
    render();
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    $("go").disabled = false;
  }
}

registerPanel("translate", {
  inputs: ["text", "examples"],
  button: "Translate",
  result: "Translation",
  label: (m) => (m.src_lang && m.tgt_lang ? `${m.name} (${m.src_lang}→${m.tgt_lang})` : m.name),
  run: translate,
  methods: ["rollout", "flow"], // what /v1/attention can add to the raw weights
  // the sentence on screen's attention again, with flow
  follow: async (method) => {
    setStatus("following attention down the layers…");
    const { text, beam } = state.data;
    state.data = await api("/v1/attention", { text, model: $("model").value || null, beam, flow: method === "flow" });
    setStatus("");
  },
  text: (data) => data.translation,
  embedded: async (data) => {
    $("text").value = data.text;
    $("text").readOnly = true;
    return data;
  },
  wire: () => {
    document.querySelectorAll("[data-example]").forEach((b) => b.addEventListener("click", () => {
      $("text").value = b.dataset.example;
      translate();
    }));
    $("text").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate();
    });
  },
});
