// backlog-scaler /ui: polls `explain` (and `ui/replicas`) every second and
// draws, per trigger, B and its terms and the replicas. Plain DOM and SVG:
// the page runs under `default-src 'self'`, so nothing here is inline,
// remote or evaluated from strings.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const STORE = "backlog-scaler-ui-v1";
  const POLL_MS = 1000;
  // History kept in localStorage, and the span one chart shows.
  const KEEP_SECONDS = 600;
  const WINDOW_SECONDS = 300;
  const MAX_POINTS = 1200;

  // Terms in B's unit (requests-equivalent), drawn on the first chart.
  const BACKLOG_SERIES = [
    { key: "b", label: "B (the value KEDA gets)", cls: "s-b" },
    { key: "w", label: "W (waiting)", cls: "s-w" },
    { key: "r", label: "T·R/C (running)", cls: "s-r" },
    { key: "cap", label: "D (capacity policy)", cls: "s-cap" },
    { key: "q", label: "w·Q (broker)", cls: "s-q" },
    { key: "lat", label: "D_lat (latency guard)", cls: "s-lat" },
    { key: "kv", label: "D_kv (KV cache)", cls: "s-kv" },
  ];
  const REPLICA_SERIES = [
    { key: "desired", label: "desired = ceil(B/T)", cls: "s-desired", step: true },
    { key: "hpa", label: "HPA's replicas (min/max, scale-down window)", cls: "s-hpa", step: true },
    { key: "ready", label: "ready pods", cls: "s-ready", step: true },
  ];

  let history = load();

  function load() {
    try {
      const saved = JSON.parse(window.localStorage.getItem(STORE) || "{}");
      return saved && typeof saved === "object" ? saved : {};
    } catch (_) {
      return {};
    }
  }

  function save() {
    try {
      window.localStorage.setItem(STORE, JSON.stringify(history));
    } catch (_) {
      // Storage full or disabled: the chart still works for this visit.
    }
  }

  function num(v) {
    return typeof v === "number" && Number.isFinite(v) ? v : null;
  }

  // Up to 3 decimals, no trailing zeros: 74.375, 2.5, 8.
  function fmt(v) {
    if (v === null || v === undefined) return "–";
    return String(Math.round(v * 1000) / 1000);
  }

  function keyOf(t) {
    return t.namespace + "/" + t.name + "/" + t.metricName;
  }

  function readyOf(replicas, t) {
    if (!replicas || !Array.isArray(replicas.replicas)) return null;
    return replicas.replicas.find((r) => r.namespace === t.namespace && r.name === t.name) || null;
  }

  function pointOf(t, reported) {
    const c = t.components || {};
    const value = num(t.value);
    return {
      t: num(t.evaluatedAtUnix) || Date.now() / 1000,
      b: value,
      w: value === null ? null : num(c.waiting),
      r: value === null ? null : num(c.runningTerm),
      cap: value === null || !c.capacity ? null : num(c.demand),
      q: value === null ? null : num(c.brokerTerm),
      lat: value === null ? null : num(c.latencyTerm),
      kv: value === null ? null : num(c.kvTerm),
      desired: value === null ? null : num(t.desiredReplicas),
      hpa: reported ? num(reported.desired) : null,
      ready: reported ? num(reported.ready) : null,
    };
  }

  // One point per evaluation: polls between two evaluations only refresh it.
  function ingest(explain, replicas) {
    const seen = new Set();
    for (const t of explain.triggers || []) {
      const key = keyOf(t);
      seen.add(key);
      const points = history[key] || (history[key] = []);
      const p = pointOf(t, readyOf(replicas, t));
      const last = points[points.length - 1];
      if (last && last.t === p.t) points[points.length - 1] = p;
      else if (!last || p.t > last.t) points.push(p);
      const oldest = p.t - KEEP_SECONDS;
      while (points.length > MAX_POINTS || (points.length && points[0].t < oldest)) points.shift();
    }
    for (const key of Object.keys(history)) if (!seen.has(key)) delete history[key];
    save();
  }

  function el(name, attrs, text) {
    const e = document.createElement(name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(name, attrs) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  // A round upper bound for the y axis: 1, 2, 5 × 10^k.
  function niceMax(v, integer) {
    if (!(v > 0)) return integer ? 2 : 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return Math.max(m * p, integer ? 2 : 0);
    return 10 * p;
  }

  function chart(points, series, name, integer) {
    const W = 760, H = 200, L = 48, R = 12, T = 10, B = 26;
    const root = svg("svg", { class: "chart", "data-chart": name, viewBox: "0 0 " + W + " " + H, role: "img" });
    const shown = series.filter((s) => points.some((p) => p[s.key] !== null));
    if (!points.length) return { root, shown };
    const tmax = points[points.length - 1].t;
    // The newest evaluation is "now", at the right edge; at least 30 s shown.
    const x1 = tmax;
    const x0 = Math.min(Math.max(points[0].t, tmax - WINDOW_SECONDS), tmax - 30);
    const visible = points.filter((p) => p.t >= x0);
    let ymax = 0;
    for (const s of shown) for (const p of visible) if (p[s.key] !== null) ymax = Math.max(ymax, p[s.key]);
    ymax = niceMax(ymax * 1.05, integer);
    const x = (t) => L + ((t - x0) / (x1 - x0)) * (W - L - R);
    const y = (v) => T + (1 - v / ymax) * (H - T - B);

    for (let i = 0; i <= 4; i++) {
      const v = (ymax * i) / 4;
      root.appendChild(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      const label = svg("text", { class: "tick", x: L - 6, y: y(v) + 4, "text-anchor": "end" });
      label.textContent = fmt(v);
      root.appendChild(label);
    }
    for (let i = 0; i <= 5; i++) {
      const t = x0 + ((x1 - x0) * i) / 5;
      const label = svg("text", { class: "tick", x: x(t), y: H - 8, "text-anchor": "middle" });
      label.textContent = i === 5 ? "now" : "−" + Math.round(x1 - t) + " s";
      root.appendChild(label);
    }
    // B (first in the list) drawn last, on top of a term equal to it.
    for (const s of shown.slice().reverse()) {
      let d = "";
      let count = 0;
      let prev = null;
      for (const p of visible) {
        const v = p[s.key];
        if (v === null) {
          prev = null;
          continue;
        }
        const px = x(p.t).toFixed(1), py = y(v).toFixed(1);
        if (prev === null) d += "M" + px + "," + py;
        else if (s.step) d += " H" + px + " V" + py;
        else d += " L" + px + "," + py;
        prev = v;
        count++;
      }
      if (!count) continue;
      root.appendChild(svg("path", { class: "line " + s.cls, d, "data-series": s.key, "data-points": count }));
      const last = visible.filter((p) => p[s.key] !== null).pop();
      root.appendChild(svg("circle", { class: "dot " + s.cls, cx: x(last.t), cy: y(last[s.key]), r: 3 }));
    }
    return { root, shown };
  }

  function legend(shown) {
    const ul = el("ul", { class: "legend" });
    for (const s of shown) {
      const li = el("li");
      li.appendChild(el("span", { class: "sw " + s.cls }));
      li.appendChild(document.createTextNode(s.label));
      ul.appendChild(li);
    }
    return ul;
  }

  function big(label, value, attr, note) {
    const box = el("div", { class: "big" });
    box.appendChild(el("span", { class: "label" }, label));
    const v = el("span", { class: "value" }, value);
    if (attr) v.setAttribute(attr[0], attr[1]);
    box.appendChild(v);
    if (note) box.appendChild(el("span", { class: "note" }, note));
    return box;
  }

  function termsTable(t) {
    const c = t.components || {};
    const p = t.params || {};
    const rows = [
      ["W", "requests waiting, summed over pods", c.waiting],
      ["R", "requests running", c.running],
      ["T·R/C", "running requests in waiting units", c.runningTerm],
      ["w·Q", "broker backlog", c.brokerTerm],
      ["D", "demand", c.demand],
      ["L", "TTFT quantile, s", c.ttftSeconds],
      ["D_lat", "latency guard", c.latencyTerm],
      ["kv", "mean KV-cache usage", c.kvCacheUsage],
      ["D_kv", "KV-cache term", c.kvTerm],
      ["U", "GPU utilisation, %", c.gpuUtilization],
      ["n", "pods reporting", c.replicasReporting],
      ["T", "targetBacklogPerReplica", p.targetPerReplica],
      ["C", "runningPerReplica", p.runningPerReplica],
    ];
    const table = el("table", { class: "terms" });
    for (const [sym, what, v] of rows) {
      if (v === null || v === undefined) continue;
      const tr = el("tr");
      tr.appendChild(el("th", {}, sym));
      tr.appendChild(el("td", { class: "num", "data-term": sym }, fmt(v)));
      tr.appendChild(el("td", { class: "what" }, what));
      table.appendChild(tr);
    }
    if (c.driver) {
      const tr = el("tr");
      tr.appendChild(el("th", {}, "max"));
      tr.appendChild(el("td", { class: "num" }, c.driver));
      tr.appendChild(el("td", { class: "what" }, "term that set B"));
      table.appendChild(tr);
    }
    return table;
  }

  function card(t, reported) {
    const key = keyOf(t);
    const points = history[key] || [];
    const section = el("section", {
      class: "trigger",
      "data-trigger": t.namespace + "/" + t.name,
      "data-metric": t.metricName,
      "data-state": t.state,
    });
    const h = el("h2", {}, t.namespace + "/" + t.name);
    h.appendChild(el("span", { class: "metric" }, t.metricName));
    h.appendChild(el("span", { class: "state state-" + t.state }, t.state));
    if (t.mode && t.mode !== "active") h.appendChild(el("span", { class: "state state-shadow" }, t.mode));
    section.appendChild(h);

    const numbers = el("div", { class: "numbers" });
    const value = num(t.value);
    numbers.appendChild(big("B", fmt(value), value === null ? null : ["data-b", String(value)]));
    const desired = num(t.desiredReplicas);
    numbers.appendChild(big("desired", fmt(desired), desired === null ? null : ["data-desired", String(desired)]));
    if (reported) {
      const starting = num(reported.starting) || 0;
      numbers.appendChild(
        big("ready", fmt(reported.ready), ["data-ready", String(reported.ready)], starting ? "+" + starting + " starting" : "")
      );
    }
    numbers.appendChild(big("active", t.active === undefined ? "–" : String(t.active)));
    section.appendChild(numbers);

    if (t.formula) section.appendChild(el("p", { class: "formula" }, t.formula));
    if (t.reason) section.appendChild(el("p", { class: "reason" }, t.reason));

    const grid = el("div", { class: "grid2" });
    const charts = el("div", { class: "charts" });
    const backlog = chart(points, BACKLOG_SERIES, "backlog", false);
    charts.appendChild(el("h3", {}, "B and its terms"));
    charts.appendChild(backlog.root);
    charts.appendChild(legend(backlog.shown));
    const reps = chart(points, REPLICA_SERIES, "replicas", true);
    charts.appendChild(el("h3", {}, "Replicas"));
    charts.appendChild(reps.root);
    charts.appendChild(legend(reps.shown));
    grid.appendChild(charts);
    grid.appendChild(termsTable(t));
    section.appendChild(grid);
    return section;
  }

  function render(explain, replicas) {
    const main = document.getElementById("triggers");
    const cards = (explain.triggers || []).map((t) => card(t, readyOf(replicas, t)));
    if (!cards.length) {
      cards.push(el("p", { class: "empty" }, "No triggers yet: a trigger appears with KEDA's first call for it."));
    }
    main.replaceChildren(...cards);
  }

  function setStatus(text, bad) {
    const s = document.getElementById("status");
    s.textContent = text;
    s.className = bad ? "status bad" : "status";
  }

  async function getJson(path) {
    const response = await fetch(path, { cache: "no-store", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(path + ": HTTP " + response.status);
    return response.json();
  }

  async function poll() {
    try {
      const [explain, replicas] = await Promise.all([
        getJson("explain"),
        getJson("ui/replicas").catch(() => null),
      ]);
      ingest(explain, replicas);
      render(explain, replicas);
      const n = (explain.triggers || []).length;
      setStatus(n + (n === 1 ? " trigger" : " triggers") + ", updated " + new Date().toLocaleTimeString(), false);
    } catch (e) {
      setStatus("cannot read /explain: " + e.message, true);
    } finally {
      window.setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
