// A new version tried on a source's recorded runs (POST /v1/sources/{id}/trial, docs/trials.md),
// shown in the edit form before it is deployed: per run, what it would have emitted beside what
// the live version emitted then.

import { api, el } from "./lib.js";

const RUNS = 10;

function shown(value) {
  const text = JSON.stringify(value);
  return text && text.length > 300 ? text.slice(0, 300) + "…" : text;
}

function where(item) {
  return `${item.id ?? "(no id)"}${item.channel ? ` [${item.channel}]` : ""}`;
}

function runItem(run) {
  const head = el("strong", {}, `${run.kind} run ${run.run_id}`);
  if (run.skipped) return el("li", { class: "skipped" }, head, ` skipped: ${run.skipped}`);
  const lines = [
    ...run.changed.map((c) => el("div", { class: "diff changed" }, `~ ${where(c)}: `, el("code", {}, shown(c.live.event)),
      " → ", el("code", {}, shown(c.trial.event)))),
    ...run.added.map((a) => el("div", { class: "diff added" }, `+ ${where(a)}: `, el("code", {}, shown(a.trial.event)))),
    ...run.removed.map((r) => el("div", { class: "diff removed" }, `− ${where(r)}: `, el("code", {}, shown(r.live.event)))),
    ...run.unknown.map((u) => el("div", { class: "diff unknown" }, `? live event ${u.live_event_id || "(id not kept)"} no longer retained`)),
  ];
  if (run.trial.error) lines.push(el("div", { class: "diff error" }, `! ${run.trial.error.code}: ${run.trial.error.message}`));
  const same = run.unchanged ? ` ${run.unchanged} unchanged` : "";
  return el("li", {}, head, lines.length ? same : ` same as live (${run.unchanged} emits)`, lines);
}

/** The trial's answer as a section: totals, how exact the starting state was, then each run. */
export function trialView(t) {
  const n = t.totals;
  return [
    el("p", { id: "trial-head" }, el("strong", {}, `Tried ${t.name} v${t.version} on the last ${t.runs_tried} runs: `),
      `${n.changed} changed, ${n.added} added, ${n.removed} removed, ${n.unchanged} unchanged, ${n.errors} threw. `,
      t.state_exact ? "this.db as it was before the first of them." : `this.db approximate: ${t.state_note}`),
    el("ol", { class: "trial-runs", "aria-label": "Trial runs" }, t.runs.map(runItem)),
    t.truncated ? el("p", { class: "hint" }, t.truncated) : null,
    el("p", { class: "hint" }, "Nothing of the source changed; calls the code made to real APIs were real."),
  ];
}

/** The trial of `body` (a PUT's body) on the source's newest runs; null when it has none on record. */
export async function tryOn(sourceId, body) {
  const trial = { runs: RUNS };
  for (const name of ["component_code", "configured_props"]) if (body[name] !== undefined) trial[name] = body[name];
  try {
    return (await api(`/sources/${sourceId}/trial`, { method: "POST", body: trial })).data;
  } catch (e) {
    if (/no runs on record/i.test(e.message)) return null;
    throw e;
  }
}
