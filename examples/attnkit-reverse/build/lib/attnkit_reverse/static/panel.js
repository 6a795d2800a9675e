// The reversal task's panel of the attention page: letters in, POST /v1/reverse, the reversal out.
"use strict";

async function reverseLetters() {
  const model = $("model").value || null;
  setStatus("reversing…");
  try {
    const out = await api("/v1/reverse", { text: $("reverse-text").value, model });
    showTranslation(out.reversed, null);
    setStatus("");
  } catch (e) {
    setStatus(e.message, true);
  }
}

registerPanel("reverse", {
  inputs: ["reverse-text"],
  button: "Reverse",
  result: "Reversed",
  label: (m) => `${m.name} (reversal)`,
  run: reverseLetters,
  text: (data) => data.reversed,
  embedded: async (data) => data,
});
