"use strict";
// The inspector: hovering a token shows its figures, its alternatives, the watched tokens and
// the chain's trace from the page's data, in a panel beside the token. Text from the results
// file goes in as textContent only, never as markup.
(() => {
  const data = JSON.parse(document.getElementById("data").textContent);
  const panel = document.getElementById("inspector");
  // How long the panel stays once the pointer leaves the token, to be reached and scrolled.
  const LINGER_MS = 400;
  let lit = null;
  let hiding = null;

  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const fixed = (x, digits) => (typeof x === "number" ? x.toFixed(digits) : "–");
  const prob = (logprob) => (typeof logprob === "number" ? Math.exp(logprob) : 0);
  // A token's text quoted with its escapes, as the playground's inspector shows it.
  const quoted = (text) => (typeof text === "string" ? JSON.stringify(text) : "?");

  const bar = (label, p, chosen) => {
    const row = el("div", chosen ? "row chosen" : "row");
    const fill = el("div", "bar");
    fill.style.width = (Math.max(0, Math.min(1, p)) * 100).toFixed(1) + "%";
    const track = el("div");
    track.append(fill);
    row.append(el("span", null, label), track, el("span", null, fixed(p, 3)));
    return row;
  };

  function alternatives(run, sample, i, id) {
    const part = [el("h4", null, "alternatives, raw p")];
    if (!sample.alternatives) {
      part.push(el("p", "note", "none in this file: sample it again with this samplab to keep them"));
      return part;
    }
    for (const [alt, logprob] of sample.alternatives[i] || []) {
      part.push(bar(quoted(run.vocab[alt]), prob(logprob), alt === id));
    }
    return part;
  }

  function watched(sample, i) {
    if (!sample.watched) return [];
    const part = [el("h4", null, "watched")];
    for (const [name, series] of Object.entries(sample.watched)) {
      part.push(bar(quoted(name), prob(series[i]), false));
    }
    return part;
  }

  function chain(sample, i) {
    const part = [el("h4", null, "chain, in the order it ran")];
    const step = sample.chain && sample.chain[i];
    if (!step) {
      part.push(el("p", "note", "no stage trace in this file: samplab sample --trace records one"));
      return part;
    }
    for (const [stage, p] of step.chosen) {
      part.push(el("div", "stage", stage.padEnd(13) + (p === null ? "cut" : fixed(p, 3))));
    }
    for (const [text, fate] of step.fates) {
      part.push(el("div", "stage", quoted(text) + "\n    " + fate.join("\n    ")));
    }
    return part;
  }

  function show(token) {
    const column = token.closest(".col");
    const run = data.runs[+token.closest(".run").dataset.run];
    const sample = run.samples[+column.dataset.sample];
    const i = +token.dataset.i;
    const id = sample.ids[i];
    const figures = [`id ${id}`, `${run.reports} ${fixed(sample.logprobs[i], 3)}`, `p ${fixed(sample.probs[i], 3)}`];
    if (sample.entropy) figures.push(`entropy ${fixed(sample.entropy[i], 2)} nats`);
    if (sample.kept_entropy) figures.push(`kept ${fixed(sample.kept_entropy[i], 2)}`);
    panel.replaceChildren(
      el("h3", null, `${column.querySelector(".head").textContent} · token ${i + 1}`),
      el("div", "token mono", quoted(run.vocab[id])),
      el("p", "dim", figures.join(" · ")),
      ...alternatives(run, sample, i, id),
      ...watched(sample, i),
      ...chain(sample, i),
    );
  }

  // Below the token, or above it where the window has no room below; never past an edge.
  function place(token) {
    const margin = 8;
    const r = token.getBoundingClientRect();
    const width = panel.offsetWidth;
    const height = panel.offsetHeight;
    const below = r.bottom + 2;
    const above = r.top - 2 - height;
    const top = below + height <= innerHeight - margin || above < margin ? below : above;
    panel.style.top = Math.max(margin, Math.min(top, innerHeight - margin - height)) + "px";
    panel.style.left = Math.max(margin, Math.min(r.left, innerWidth - margin - width)) + "px";
  }

  function hide() {
    if (lit) lit.classList.remove("cur");
    lit = null;
    panel.hidden = true;
  }

  document.addEventListener("mouseover", (event) => {
    clearTimeout(hiding);
    if (panel.contains(event.target)) return;
    const token = event.target.closest(".t");
    if (!token) {
      if (lit) hiding = setTimeout(hide, LINGER_MS);
      return;
    }
    if (token === lit) return;
    if (lit) lit.classList.remove("cur");
    lit = token;
    token.classList.add("cur");
    show(token);
    panel.hidden = false;
    panel.scrollTop = 0;
    place(token);
  });
})();
