// A source's this.db on its page (issue 34): its keys and values, a key set or removed (a JSON
// merge patch), and its snapshots (one per deploy, update and restore) each with a Restore button.
// Keys and values reach the page as text (JSON in a <pre>), never as HTML: a component stores
// whatever it likes there.

import { api, el, say, when } from "./lib.js";

function dbTable(state) {
  const keys = Object.keys(state.db).sort();
  const rows = keys.map((key) => el("tr", { "data-key": key },
    el("th", { scope: "row" }, el("code", {}, key)),
    el("td", {}, el("pre", { class: "value" }, JSON.stringify(state.db[key], null, 2)))));
  return [
    el("p", { class: "meta", id: "state-size" },
      `${keys.length} key${keys.length === 1 ? "" : "s"}, ${state.size} of ${state.max_bytes} bytes`),
    keys.length
      ? el("table", { class: "config", id: "state-table", "aria-label": "this.db" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Key"), el("th", { scope: "col" }, "Value"))),
        el("tbody", {}, rows))
      : el("p", { class: "empty" }, "this.db is empty."),
  ];
}

function snapshotsTable(id, snapshots, reload) {
  if (!snapshots.length) return el("p", { class: "empty" }, "No snapshots yet.");
  const restore = async (snapshot) => {
    if (!confirm(`Restore this.db as it was at ${when(snapshot.created_at)} (${snapshot.reason})? It runs the source's deactivate and activate hooks, like an update.`)) return;
    try {
      const restored = (await api(`/sources/${id}/state/restore`, { method: "POST", body: { snapshot_id: snapshot.id } })).data;
      say(`Restored. To undo it, restore the newest snapshot (${restored.undo_snapshot_id}).`);
      await reload();
    } catch (e) { say(e.message, true); }
  };
  return el("table", { class: "stack", id: "snapshots-table", "aria-label": "Snapshots" },
    el("thead", {}, el("tr", {}, ["Taken", "At", "Code", "Size", ""].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, snapshots.map((s) => el("tr", { "data-id": s.id },
      el("td", { "data-label": "Taken" }, when(s.created_at)),
      el("td", { "data-label": "At" }, s.reason),
      el("td", { "data-label": "Code" }, `${s.component_id} v${s.component_version}`),
      el("td", { "data-label": "Size" }, `${s.size} bytes`),
      el("td", {}, el("button", { onclick: () => restore(s), "aria-label": `Restore ${s.id}` }, "Restore"))))));
}

/** The section, drawn again in place after a change. */
export async function stateSection(id) {
  const box = el("section", { id: "state" });
  const key = el("input", { id: "state-key", type: "text", autocomplete: "off" });
  const value = el("textarea", { id: "state-value", class: "short", rows: 2, "aria-describedby": "state-value-hint" });
  const reload = async () => {
    const [state, snapshots] = await Promise.all([api(`/sources/${id}/state`), api(`/sources/${id}/state/snapshots`)]);
    box.replaceChildren(
      el("h3", {}, "State (this.db)"),
      ...dbTable(state.data),
      el("form", { id: "state-form", onsubmit: async (e) => {
        e.preventDefault();
        let parsed;
        try { parsed = JSON.parse(value.value); } catch { parsed = value.value; }  // not JSON: the text itself
        if (!key.value) { say("Give the key to set.", true); return; }
        try {
          await api(`/sources/${id}/state`, { method: "PATCH", body: { [key.value]: parsed } });
          say(parsed === null ? `Removed ${key.value}.` : `Set ${key.value}.`);
          key.value = ""; value.value = "";
          await reload();
        } catch (err) { say(err.message, true); }
      } },
        el("label", { for: "state-key" }, "Key"), key,
        el("label", { for: "state-value" }, "Value ", el("span", { class: "hint", id: "state-value-hint" }, "(JSON, or plain text; null removes the key)")), value,
        el("div", { class: "row" }, el("button", { type: "submit" }, "Set key"),
          el("button", { type: "button", onclick: () => reload().catch((e) => say(e.message, true)) }, "Reload"))),
      el("h4", {}, "Snapshots"),
      el("p", { class: "hint" }, "The newest 10: taken at each deploy (the state it left), update and restore (the state each replaced)."),
      snapshotsTable(id, snapshots.data, reload));
  };
  await reload();
  return box;
}
