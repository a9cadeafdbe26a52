// Hot keys on the web UI: one table per fields-grouped stream of each component with hot keys,
// and a badge under each such component's graph node naming its top key. The section is hidden
// while no component has any (key counting off, or not allowed): no empty table stands in.
"use strict";
(function () {
  const ui = window.tuplemeshUi;
  // Keys are user data of any length: shown shortened, always as text (textContent, never
  // markup), the whole text in the cell's tooltip.
  const KEY_CHARS = 48, BADGE_KEY_CHARS = 14;

  const section = document.createElement("section");
  section.id = "hotkeys-section";
  section.hidden = true;
  section.setAttribute("aria-labelledby", "hotkeys-title");
  section.appendChild(Object.assign(document.createElement("h2"), { id: "hotkeys-title", textContent: "Hot keys" }));
  section.appendChild(Object.assign(document.createElement("p"), {
    className: "legend",
    textContent: "The keys that take most of each fields-grouped stream into a component, with their " +
      "tuples and shares of the stream's tuples and execute time since each worker started. Skew: the " +
      "hottest key's share over one task's fair share; above 1, that key alone gives its task more " +
      "than an even split would.",
  }));
  const box = section.appendChild(Object.assign(document.createElement("div"), { id: "hotkeys" }));

  // The stream whose hottest key is the component's top key: the highest share of its stream.
  function topKey(hot) {
    let best = null;
    hot.streams.forEach(s => { if (s.keys.length && (!best || s.keys[0].tuple_share > best.tuple_share)) best = s.keys[0]; });
    return best;
  }

  function update(view) {
    const hot = Object.values(view.components).filter(c => c.hot_keys).sort((a, b) => a.name.localeCompare(b.name));
    section.hidden = hot.length === 0;
    box.replaceChildren();
    hot.forEach(c => {
      const h3 = document.createElement("h3");
      h3.textContent = c.name + ": skew " + ui.num(c.hot_keys.skew, 2);
      box.appendChild(h3);
      c.hot_keys.streams.forEach(s => {
        const table = document.createElement("table");
        table.className = "hotkeys";
        Object.assign(table.dataset, { component: c.name, source: s.source_component, stream: s.stream });
        const caption = document.createElement("caption");
        caption.textContent = "Stream " + s.stream + " from " + s.source_component + ": " + ui.num(s.tuples) +
          " tuples on " + s.tasks + (s.tasks === 1 ? " task" : " tasks") + ", skew " + ui.num(s.skew, 2) + "; " +
          (s.error_bound ? "a count may be up to " + ui.num(s.error_bound) + " below the truth" : "counts exact") +
          (s.sample_every > 1 ? "; counted in one inbox batch of " + s.sample_every : "");
        table.appendChild(caption);
        const head = document.createElement("tr");
        ["rank", "key", "tuples", "share of tuples", "share of execute time"].forEach(t => head.appendChild(ui.th(t)));
        table.appendChild(document.createElement("thead")).appendChild(head);
        const body = table.appendChild(document.createElement("tbody"));
        s.keys.forEach((k, i) => {
          const tr = body.appendChild(document.createElement("tr"));
          tr.appendChild(ui.th(String(i + 1), "row"));
          const key = tr.appendChild(document.createElement("td"));
          key.className = "key text";
          key.textContent = ui.shorten(k.key, KEY_CHARS);
          key.title = k.key + (k.key_truncated ? "…" : "");
          [ui.num(k.tuples), ui.pct(k.tuple_share), ui.pct(k.execute_share)].forEach(v =>
            tr.appendChild(document.createElement("td")).textContent = v);
        });
        box.appendChild(table);
      });
    });
  }

  function badge(c, hot) {
    const top = topKey(hot);
    if (!top) return null;
    return {
      text: "top key: " + ui.shorten(top.key, BADGE_KEY_CHARS) + " (" + ui.pct(top.tuple_share) + ")",
      title: "hottest key of " + c.name + ": " + top.key + ", " + ui.num(top.tuples) + " tuples, " +
        ui.pct(top.tuple_share) + " of its stream",
    };
  }

  ui.registerPanel({ name: "hot_keys", section, update, badge, badgeClass: "hotkey-badge" });
})();
