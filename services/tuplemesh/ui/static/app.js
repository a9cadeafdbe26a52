// tuplemesh UI: follows /ui/events (one view per second) and redraws the graph and tables.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_W = 190, NODE_H = 92, COL_GAP = 130, ROW_GAP = 36, PAD = 24;
  let drawnGraph = "";

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function num(v, digits) {
    if (v === null || v === undefined) return "–";
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits || 0 });
  }
  function bytes(v) {
    if (!v) return "0 B";
    const units = ["B", "KiB", "MiB", "GiB"]; let i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(i ? 1 : 0) + " " + units[i];
  }
  function pct(v) { return Math.round(100 * v) + "%"; }
  // Text shortened to ``n`` characters (not UTF-16 units), with an ellipsis when cut.
  function shorten(text, n) {
    const chars = Array.from(text);
    return chars.length > n ? chars.slice(0, n - 1).join("") + "…" : text;
  }
  function componentState(c) {
    if (c.backpressured) return "congested";
    if (c.inbox_fill > 0.5) return "busy";
    return "ok";
  }
  const STATE_TEXT = { ok: "flowing", busy: "inbox filling", congested: "backpressured" };
  // The features' panels (each registers itself from its own script: registerPanel below), in
  // the order their scripts ran.
  const panels = [];
  // A panel's own code, run so that its failure leaves the rest of the page drawn (reported
  // once per panel and part in the console).
  const reported = new Set();
  function guarded(panel, part, run) {
    try { return run(); } catch (e) {
      if (!reported.has(panel.name + part)) { reported.add(panel.name + part); console.error("panel " + panel.name + " (" + part + "):", e); }
      return null;
    }
  }

  // Columns by longest path from the spouts (cycles are cut where a node is revisited).
  function layout(graph) {
    const depth = {};
    graph.components.forEach(c => { depth[c.name] = 0; });
    for (let round = 0; round < graph.components.length; round++) {
      let changed = false;
      graph.streams.forEach(s => {
        if (s.source in depth && s.target in depth && depth[s.target] < depth[s.source] + 1 &&
            depth[s.source] + 1 < graph.components.length) {
          depth[s.target] = depth[s.source] + 1; changed = true;
        }
      });
      if (!changed) break;
    }
    const columns = {}, pos = {};
    // room under each node for one badge per panel that draws them (the first fits the gap)
    const rowGap = ROW_GAP + 20 * Math.max(0, panels.filter(p => p.badge).length - 1);
    graph.components.forEach(c => { (columns[depth[c.name]] = columns[depth[c.name]] || []).push(c.name); });
    let rows = 0;
    Object.keys(columns).forEach(d => {
      columns[d].forEach((name, i) => {
        pos[name] = { x: PAD + d * (NODE_W + COL_GAP), y: PAD + i * (NODE_H + rowGap) };
      });
      rows = Math.max(rows, columns[d].length);
    });
    const cols = Object.keys(columns).length;
    return { pos, width: 2 * PAD + cols * NODE_W + (cols - 1) * COL_GAP, height: 2 * PAD + rows * (NODE_H + rowGap) };
  }

  function drawGraph(graph) {
    const svg = document.getElementById("graph");
    svg.replaceChildren();
    const { pos, width, height } = layout(graph);
    svg.setAttribute("width", width); svg.setAttribute("height", height);
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    const defs = el("defs", {});
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" });
    marker.appendChild(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#555" }));
    defs.appendChild(marker); svg.appendChild(defs);
    const title = el("title", {}, "Topology " + graph.name + ": " + graph.components.length + " components, " + graph.streams.length + " streams");
    svg.appendChild(title);
    const seen = {};
    graph.streams.forEach(s => {
      const a = pos[s.source], b = pos[s.target];
      if (!a || !b) return;
      const key = s.source + ">" + s.target; const k = seen[key] = (seen[key] || 0) + 1;
      const g = el("g", { class: "edge", "data-source": s.source, "data-target": s.target, "data-stream": s.stream });
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
      const self = s.source === s.target;
      g.appendChild(el("line", { x1: self ? a.x + NODE_W / 2 : x1, y1: self ? a.y : y1, x2: self ? a.x + NODE_W / 2 + 10 : x2, y2: self ? a.y - 1 : y2, "marker-end": "url(#arrow)" }));
      const label = s.stream + " (" + s.grouping + (s.fields.length ? ": " + s.fields.join(", ") : "") + ")";
      g.appendChild(el("text", { x: (x1 + x2) / 2 - 40, y: (y1 + y2) / 2 - 6 - 13 * (k - 1) }, label));
      g.appendChild(el("title", {}, "stream " + s.stream + " from " + s.source + " to " + s.target + ", " + s.grouping + " grouping"));
      svg.appendChild(g);
    });
    graph.components.forEach(c => {
      const p = pos[c.name];
      const g = el("g", { class: "node ok", "data-component": c.name, transform: "translate(" + p.x + "," + p.y + ")" });
      g.appendChild(el("rect", { width: NODE_W, height: NODE_H }));
      g.appendChild(el("text", { class: "name", x: 8, y: 17 }, c.name + (c.spout ? " (spout)" : "") + " ×" + c.parallelism));
      ["rates", "latency", "problems", "flag"].forEach((cls, i) => g.appendChild(el("text", { class: cls, x: 8, y: 35 + 17 * i }, "")));
      g.appendChild(el("title", {}, c.name));
      // one badge per panel that has them, under the node (in the gap to the next row), shown
      // while the panel gives one for the component
      panels.filter(p => p.badge).forEach((p, i) => {
        const badge = el("g", { class: "panel-badge " + (p.badgeClass || ""), "data-panel": p.name, display: "none" });
        badge.appendChild(el("rect", { y: NODE_H + 3 + 20 * i, width: NODE_W, height: 18 }));
        badge.appendChild(el("text", { x: 8, y: NODE_H + 16 + 20 * i }, ""));
        badge.appendChild(el("title", {}, ""));
        g.appendChild(badge);
      });
      svg.appendChild(g);
    });
  }

  function updateGraph(view) {
    for (const g of document.querySelectorAll("#graph .node")) {
      const c = view.components[g.dataset.component];
      if (!c) continue;
      const state = componentState(c);
      g.setAttribute("class", "node " + state);
      g.dataset.state = state;
      g.querySelector(".rates").textContent = "exec " + num(c.executed_per_second) + "/s · emit " + num(c.emitted_per_second) + "/s";
      g.querySelector(".latency").textContent = "execute " + (c.execute_ms === null ? "–" : num(c.execute_ms, 3) + " ms");
      g.querySelector(".problems").textContent = "errors " + num(c.errors) + " · losses " + num(c.losses);
      g.querySelector(".flag").textContent = state === "congested" ? "BACKPRESSURED (" + c.congested_tasks + (c.congested_tasks === 1 ? " task)" : " tasks)") : STATE_TEXT[state];
      g.querySelector(":scope > title").textContent = c.name + ": " + STATE_TEXT[state];
      panels.filter(p => p.badge).forEach(p => {
        const badge = g.querySelector('.panel-badge[data-panel="' + p.name + '"]');
        if (!badge) return;
        const shown = c[p.name] ? guarded(p, "badge", () => p.badge(c, c[p.name])) : null;  // {text, title} or null
        badge.setAttribute("display", shown ? "inline" : "none");
        if (shown) {
          badge.querySelector("text").textContent = shown.text;
          badge.querySelector("title").textContent = shown.title;
        }
      });
    }
  }

  function cells(tr, values) {
    tr.replaceChildren();
    values.forEach(v => {
      const td = document.createElement("td");
      if (typeof v === "object") { td.textContent = v.text; td.className = v.cls; } else td.textContent = v;
      tr.appendChild(td);
    });
  }

  function updateTables(view) {
    const ctbody = document.querySelector("#components tbody");
    ctbody.replaceChildren();
    Object.values(view.components).sort((a, b) => a.name.localeCompare(b.name)).forEach(c => {
      const tr = document.createElement("tr"); tr.dataset.component = c.name;
      const state = componentState(c);
      cells(tr, [c.name, { text: STATE_TEXT[state], cls: "state " + state }, num(c.executed_per_second), num(c.emitted_per_second),
        c.execute_ms === null ? "–" : num(c.execute_ms, 3), num(c.executed), num(c.emitted), num(c.errors), num(c.losses),
        num(c.congested_tasks), pct(c.inbox_fill)]);
      ctbody.appendChild(tr);
    });
    const wtbody = document.querySelector("#workers tbody");
    wtbody.replaceChildren();
    view.workers.forEach(w => {
      const tr = document.createElement("tr"); tr.dataset.target = w.target; tr.dataset.health = w.up ? "up" : "down";
      if (!w.up) {
        cells(tr, [w.worker === undefined ? "?" : String(w.worker), w.target, { text: "down: " + w.error, cls: "health down text" }, "", "", "", "", "", "", "", "", ""]);
      } else {
        cells(tr, [String(w.worker), w.target, { text: "up (" + w.state + ")", cls: "health up text" }, { text: w.epoch, cls: "text" },
          num(w.uptime_seconds) + " s", pct(w.queue_fill), w.congested_tasks + " of " + w.tasks,
          bytes(w.receive_held_bytes) + (w.receive_held_bytes_capacity ? " of " + bytes(w.receive_held_bytes_capacity) : ""),
          bytes(w.transfer_held_bytes) + (w.transfer_held_bytes_capacity ? " of " + bytes(w.transfer_held_bytes_capacity) : ""),
          bytes(w.rss_bytes), num(w.losses), num(w.peers_down)]);
      }
      wtbody.appendChild(tr);
    });
    const epochs = document.getElementById("epochs");
    epochs.textContent = view.epochs.length > 1
      ? "Rescaling: workers route by different epochs (" + view.epochs.join(", ") + ")"
      : (view.epochs.length ? "Epoch " + view.epochs[0] + ", " + view.workers_expected + " workers" : "");
    const history = view.history || [];
    document.getElementById("history-section").hidden = history.length === 0;
    const htbody = document.querySelector("#history tbody");
    htbody.replaceChildren();
    history.forEach((h, i) => {
      const tr = document.createElement("tr"); tr.dataset.epoch = h.epoch;
      cells(tr, [{ text: h.epoch, cls: "text" }, String(h.workers),
        { text: new Date(h.since * 1000).toLocaleString(), cls: "text" }, { text: i === 0 ? "current" : "", cls: "text" }]);
      htbody.appendChild(tr);
    });
    const dl = document.getElementById("checkpoints");
    const c = view.checkpoints;
    if (c) {
      dl.replaceChildren();
      [["last committed", c.last_committed < 0 ? "none yet" : "#" + c.last_committed],
       ["its duration", c.last_committed < 0 ? "–" : num(c.last_duration_seconds, 3) + " s"],
       ["committed", num(c.committed)], ["abandoned", num(c.abandoned)], ["rollbacks", num(c.rollbacks)],
       ["store errors", num(c.store_errors)], ["attempt", num(c.attempt)], ["coordinator", "worker " + c.worker]].forEach(([k, v]) => {
        dl.appendChild(Object.assign(document.createElement("dt"), { textContent: k }));
        dl.appendChild(Object.assign(document.createElement("dd"), { textContent: v, className: "cp-" + k.replace(/ /g, "-") }));
      });
    }
  }

  function th(text, scope) {
    return Object.assign(document.createElement("th"), { textContent: text, scope: scope || "col" });
  }

  function render(view) {
    document.getElementById("topology").textContent = view.topology ? "· " + view.topology : "";
    const one = view.workers[0];
    document.getElementById("scope").textContent = view.scope === "worker" && one && one.up
      ? "This page shows worker " + one.worker + " of " + one.workers + " and the tasks it runs; " +
        "`tuplemesh ui --target ...` shows every worker."
      : (view.served_by !== undefined
        ? "Served by worker " + view.served_by + ", which asks every other worker for its state at each refresh."
        : "");
    if (view.graph) {
      const key = JSON.stringify(view.graph);
      if (key !== drawnGraph) { drawGraph(view.graph); drawnGraph = key; }
      updateGraph(view);
    }
    updateTables(view);
    panels.forEach(p => guarded(p, "update", () => p.update(view)));
  }

  function connect() {
    const status = document.getElementById("connection");
    const events = new EventSource("/ui/events");
    events.onmessage = e => {
      status.textContent = "live, updated " + new Date().toLocaleTimeString();
      status.dataset.state = "live";
      render(JSON.parse(e.data));
    };
    events.onerror = () => {
      status.textContent = "connection lost: retrying";
      status.dataset.state = "lost";
    };
  }
  document.addEventListener("DOMContentLoaded", connect);

  // What a feature's panel script uses (the page loads it after this one):
  // registerPanel({name, section, update(view), badge(component, entry), badgeClass}) where
  // ``name`` is its entry's name in each component of the view, ``section`` an element of its own
  // (placed in #panels, in registration order), ``update`` draws the view's entries into it, and
  // ``badge`` (optional) returns {text, title} for a component's badge under its graph node, or
  // null for none. Everything a panel shows of user data goes in as text (textContent), never
  // as markup.
  window.tuplemeshUi = {
    num, pct, shorten, th,
    registerPanel(panel) {
      panels.push(panel);
      document.getElementById("panels").appendChild(panel.section);
    },
  };
})();
