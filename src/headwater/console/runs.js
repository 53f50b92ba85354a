// A source's runs on record: the newest first (time, what started it, outcome, duration, events
// by channel, error), older ones a page at a time; one click shows a run in full (its input,
// logs, `this.db` keys written, error stack) and re-runs it against the current code.

import { tree } from "./events.js";
import { api, el, onLeave, say, whenMs } from "./lib.js";

const PAGE = 20;
const WAIT_MS = 30000;  // how long the list looks for a run just queued before giving up

const channelName = (name) => (name === "" ? "events" : name);
export const durationInWords = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`);
const kindOf = (run) => (run.kind === "hook" ? `hook: ${run.hook}` : run.kind);
const emittedInWords = (emitted) => Object.entries(emitted || {}).map(([ch, e]) => `${channelName(ch)} ${e.count}`).join(" · ");
const errorInWords = (error) => (error ? `${error.code}: ${error.message}` : "");
const badge = (outcome) => el("span", { class: `badge ${outcome === "success" ? "ok" : outcome === "error" ? "failed" : "off"}` },
  outcome === "not_run" ? "not run" : outcome);

function facts(rows) {
  return el("table", { class: "config" }, el("tbody", {}, rows.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, v)))));
}

/** The runs panel of a source: `panel` is its section; `awaitNew()` refreshes it until a run
 * newer than the newest shown appears (after a run or re-run is queued), `reload()` once. */
export function runsPanel(sourceId) {
  const base = `/sources/${sourceId}/runs`;
  const body = el("tbody");
  const more = el("button", { type: "button", hidden: true, onclick: () => loadPage(cursor) }, "Older runs");
  const detail = el("section", { id: "run-detail", "aria-live": "polite" }, el("p", { class: "hint" }, "Select a run to see it in full."));
  const empty = el("p", { class: "hint", id: "no-runs", hidden: true }, "No runs yet.");
  let cursor = null;
  let newest = null;  // id of the newest run listed
  let waiting = null;  // the timer of awaitNew's next look
  onLeave(() => clearTimeout(waiting));

  function select(row) {
    body.querySelectorAll("tr").forEach((r) => r.removeAttribute("aria-selected"));
    row.setAttribute("aria-selected", "true");
  }

  function rowOf(run) {
    const open = el("button", { type: "button", class: "link", "aria-label": `Run ${run.id}`, onclick: () => { select(row); show(run.id); } },
      el("time", { datetime: new Date(run.ended_at_ms).toISOString() }, whenMs(run.ended_at_ms)));
    const row = el("tr", { "data-id": run.id, onclick: (e) => { if (e.target !== open && !open.contains(e.target)) open.click(); } },
      el("td", {}, open),
      el("td", {}, kindOf(run), run.rerun_of ? el("span", { class: "hint" }, ` of ${run.rerun_of}`) : null),
      el("td", {}, badge(run.outcome)),
      el("td", { class: "num" }, durationInWords(run.duration_ms)),
      el("td", {}, emittedInWords(run.emitted)),
      el("td", { class: "error" }, errorInWords(run.error)));
    return row;
  }

  async function loadPage(after) {
    const page = await api(base, { query: { limit: PAGE, after: after || undefined } });
    if (!after) { body.replaceChildren(); newest = page.data.length ? page.data[0].id : null; }
    page.data.forEach((run) => body.append(rowOf(run)));
    cursor = page.page_info && page.page_info.end_cursor;
    more.hidden = !(cursor && page.data.length === PAGE);
    empty.hidden = body.children.length > 0;
    return page.data;
  }

  async function rerun(run) {
    try {
      await api(`${base}/${run.id}/rerun`, { method: "POST" });
      say("Re-run queued.");
      awaitNew();
    } catch (e) { say(e.message, true); }
  }

  async function show(runId) {
    let run;
    try { run = (await api(`${base}/${runId}`)).data; } catch (e) { say(e.message, true); return; }
    const error = run.error;
    detail.replaceChildren(...[
      el("h3", {}, `Run ${run.id} `, badge(run.outcome)),
      el("div", { class: "row" },
        run.rerunnable ? el("button", { class: "primary", type: "button", onclick: () => rerun(run) }, "Re-run") : null,
        el("span", { class: "hint" }, run.rerunnable ? "runs the same input against the source's current code"
          : run.kind === "hook" ? "a hook is not re-run" : "its input was too large to keep: it cannot be re-run")),
      facts([
        ["Kind", kindOf(run)],
        ["Re-run of", run.rerun_of ? el("button", { type: "button", class: "link", onclick: () => show(run.rerun_of) }, run.rerun_of) : null],
        ["Ended", new Date(run.ended_at_ms).toLocaleString()],
        ["Duration", durationInWords(run.duration_ms)],
        ["CPU", run.cpu_ms === null ? null : durationInWords(run.cpu_ms)],
        ["Response status", run.response_status === null ? null : String(run.response_status)],
        ["Events emitted", emittedInWords(run.emitted) || "none"],
        ["Code", run.component_id],
      ]),
      error ? el("div", { id: "run-error" }, el("h4", {}, "Error"),
        el("p", { class: "error" }, errorInWords(error), error.step ? ` (step ${error.step})` : ""),
        error.stack ? el("pre", { class: "json" }, error.stack) : null) : null,
      el("h4", {}, "Trigger"),
      run.trigger_kept ? el("div", { class: "inspector", id: "run-trigger" }, tree(run.trigger))
        : el("p", { class: "hint" }, `Not kept: ${run.trigger_bytes} bytes of JSON.`),
      run.trigger_kept ? el("details", {}, el("summary", {}, "Raw JSON"), el("pre", { class: "json", id: "run-trigger-json" }, JSON.stringify(run.trigger, null, 2))) : null,
      el("h4", {}, `Logs (${run.log_count})`),
      run.logs.length ? el("ul", { class: "events", id: "run-logs", "aria-label": "Run logs" },
        run.logs.map((l) => el("li", {},
          typeof l.ts === "number" ? el("time", { datetime: new Date(l.ts).toISOString() }, whenMs(l.ts)) : null,
          el("span", { class: "what" }, `${l.level}: `), l.message))) : el("p", { class: "hint" }, "None."),
      run.logs_dropped ? el("p", { class: "hint" }, `${run.logs_dropped} more lines are on the $logs channel only.`) : null,
      el("h4", {}, `this.db keys written (${run.db_keys_count})`),
      run.db_keys_written.length ? el("ul", { id: "run-db-keys" }, run.db_keys_written.map((k) => el("li", {}, el("code", {}, k))),
        run.db_keys_count > run.db_keys_written.length ? el("li", { class: "hint" }, `and ${run.db_keys_count - run.db_keys_written.length} more`) : null)
        : el("p", { class: "hint" }, "None."),
    ].filter(Boolean));
  }

  /** Looks again every second (up to WAIT_MS) until a run newer than those listed is on record. */
  function awaitNew() {
    clearTimeout(waiting);
    const before = newest;
    const deadline = Date.now() + WAIT_MS;
    const look = async () => {
      try { await loadPage(null); } catch (e) { say(e.message, true); return; }
      if (newest === before && Date.now() < deadline) waiting = setTimeout(look, 1000);
    };
    waiting = setTimeout(look, 300);
  }

  const panel = el("section", { id: "runs" },
    el("div", { class: "row" }, el("h3", {}, "Runs"),
      el("button", { type: "button", onclick: () => loadPage(null).catch((e) => say(e.message, true)) }, "Refresh")),
    el("table", { id: "runs-table", class: "stack runs", "aria-label": "Runs" },
      el("thead", {}, el("tr", {}, ["Ended", "Kind", "Outcome", "Duration", "Emitted", "Error"].map((h) => el("th", {}, h)))),
      body),
    empty, el("div", { class: "row" }, more), detail);
  return { panel, load: () => loadPage(null), awaitNew };
}
