// A source's or workflow's runs on record: the newest first (time, what started it, outcome,
// duration, events by channel, error), older ones a page at a time; one click shows a run in full
// (its input, logs, `this.db` keys written, error stack) and re-runs it against the current code.

import { tree } from "./events.js";
import { api, compareIds, el, onLeave, say, whenMs } from "./lib.js";

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

/** The runs panel of an emitter (`kind` is sources or workflows): `panel` is its section, `load()`
 * fills it; `awaitNew()` looks again until a run newer than those shown is on record (after a run
 * is queued), `awaitRunOf(event)` until the run that emitted a live event is; `onNew(f)` calls f
 * when newer runs were listed. */
export function runsPanel(kind, id) {
  const base = `/${kind}/${id}/runs`;
  const body = el("tbody");
  const more = el("button", { type: "button", hidden: true, onclick: () => loadOlder().catch((e) => say(e.message, true)) }, "Older runs");
  const detail = el("section", { id: "run-detail", "aria-live": "polite" }, el("p", { class: "hint" }, "Select a run to see it in full."));
  const empty = el("p", { class: "hint", id: "no-runs", hidden: true }, "No runs yet.");
  const table = el("table", { id: "runs-table", class: "stack runs", "aria-label": "Runs" },
    el("thead", {}, el("tr", {}, ["Ended", "Kind", "Outcome", "Duration", "Emitted", "Error"].map((h) => el("th", {}, h)))),
    body);
  const showEmpty = () => { empty.hidden = body.children.length > 0; table.hidden = !empty.hidden; };
  let cursor = null;
  let newest = null;  // id of the newest run listed
  let shown = [];  // the runs of the first page
  let waiting = null;  // the timer of the next look
  let pending = [];  // what the next look waits for: { listed(), until }
  let told = () => {};  // onNew's listener
  let loaded = false;  // the first page is in
  onLeave(() => { clearTimeout(waiting); pending = []; });

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

  /** An older page, after the runs listed. */
  async function loadOlder() {
    const page = await api(base, { query: { limit: PAGE, after: cursor } });
    page.data.forEach((run) => body.append(rowOf(run)));
    setCursor(page);
  }

  function setCursor(page) {
    cursor = page.page_info && page.page_info.end_cursor;
    more.hidden = !(cursor && page.data.length === PAGE);
    showEmpty();
  }

  /** The newest page again. A run on record does not change, so only newer ones are added (the
   * older pages loaded and the run selected stay), unless a whole page is new. One at a time. */
  let loading = Promise.resolve();
  function loadNewest() {
    loading = loading.catch(() => {}).then(loadNewestNow);
    return loading;
  }
  async function loadNewestNow() {
    const page = await api(base, { query: { limit: PAGE } });
    const fresh = newest === null ? page.data : page.data.filter((run) => compareIds(run.id, newest) > 0);
    shown = page.data;
    if (fresh.length === page.data.length) {
      body.replaceChildren(...fresh.map(rowOf));
      setCursor(page);
    } else {
      body.prepend(...fresh.map(rowOf));
    }
    if (fresh.length && loaded) told();  // not for the first page: nothing was listed before it
    loaded = true;
    if (page.data.length) newest = page.data[0].id;
    showEmpty();
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
        el("span", { class: "hint" }, run.rerunnable ? `runs the same input against the ${kind === "workflows" ? "workflow's current steps" : "source's current code"}`
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

  /** Looks again every second until each thing waited for is listed (or WAIT_MS passed). */
  function lookUntil(listed) {
    if (listed()) return;
    pending.push({ listed, until: Date.now() + WAIT_MS });
    if (waiting === null) waiting = setTimeout(look, 300);
  }
  async function look() {
    try { await loadNewest(); } catch (e) { say(e.message, true); pending = []; }
    pending = pending.filter((p) => !p.listed() && Date.now() < p.until);
    waiting = pending.length ? setTimeout(look, 1000) : null;
  }
  /** After a run or re-run is queued: until a run newer than those listed is on record. */
  function awaitNew() {
    const before = newest;
    lookUntil(() => newest !== before);
  }
  /** After an event arrived live on a channel: until the run that emitted it is listed (a `$logs`
   * line is not counted among a run's events: nothing to wait for). */
  function awaitRunOf(item, channel) {
    if (channel === "$logs") return;
    lookUntil(() => shown.some((run) => Object.values(run.emitted || {}).some((e) => e.ids.includes(item.id))));
  }

  const panel = el("section", { id: "runs" },
    el("div", { class: "row" }, el("h3", {}, "Runs"),
      el("button", { type: "button", onclick: () => loadNewest().catch((e) => say(e.message, true)) }, "Refresh")),
    table, empty, el("div", { class: "row" }, more), detail);
  return { panel, load: loadNewest, awaitNew, awaitRunOf, onNew: (listener) => { told = listener; } };
}
