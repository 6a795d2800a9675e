// The page's panels, one per task that ships one (its package's static/panel.js): what a task's model reads (its
// inputs), how it asks the API (run), what it answers (text), which followed maps its API can give
// (methods: rollout, flow) and how it asks for one the payload lacks (follow), and, where its attention is not a pair of token sequences, how its view
// is drawn (view, draw). Each task's panel.js registers here.
"use strict";

const PANELS = {};

function registerPanel(task, panel) {
  PANELS[task] = panel;
}
