// A source's page: what it is and how it is configured, edit and re-deploy, pause and resume,
// its schedule, its health, its runs on record, its events, logs and errors, running it by hand, and who
// listens to it.

import { eventDetail, eventPanes } from "./events.js";
import { healthOf, healthSection } from "./health.js";
import { api, el, refresh, render, say, when } from "./lib.js";
import { labelOf, propInput, timerInWords, valueInWords } from "./props.js";
import { runsPanel } from "./runs.js";
import { stateSection } from "./state.js";
import { subscriptionsSection } from "./subscriptions.js";
import { trialView, tryOn } from "./trial.js";

async function componentOf(source) {
  try { return (await api(`/components/${source.component_id}`)).data; } catch { return null; }
}

function configuration(source, component) {
  const defs = component ? component.configurable_props : Object.keys(source.configured_props).map((name) => ({ name, type: "string" }));
  const rows = defs.filter((p) => p.type !== "$.service.db" && p.name in source.configured_props).map((p) =>
    el("tr", {}, el("th", { scope: "row" }, labelOf(p)), el("td", {}, valueInWords(p, source.configured_props[p.name]) ?? "")));
  return el("section", { id: "configuration" }, el("h3", {}, "Configuration"),
    component && component.description ? el("p", { class: "hint" }, component.description) : null,
    rows.length ? el("table", { class: "config" }, el("tbody", {}, rows)) : el("p", { class: "hint" }, "No props to configure."));
}

async function scheduleLine(source, component) {
  const timer = component && component.configurable_props.find((p) => p.type === "$.interface.timer");
  if (!timer) return [null, null];
  const s = (await api(`/sources/${source.id}/schedule`)).data;
  const line = el("p", { id: "schedule" }, el("strong", {}, "Schedule: "), `runs ${timerInWords(s)}. `,
    s.next_run_at ? `Next run ${when(s.next_run_at)}.` : "Paused: no run is scheduled.",
    s.last_run_at ? ` Last run ${when(s.last_run_at)}.` : "");
  return [line, s.timezone];
}

function editForm(source, component, timezone) {
  const name = el("input", { type: "text", id: "edit-name", value: source.name });
  const inputs = component.configurable_props.map((p) => {
    let current = source.configured_props[p.name];
    if (p.type === "$.interface.timer" && current) current = { ...current, timezone: current.cron ? timezone : undefined };
    return { prop: p, ...propInput(p, component.id, current) };
  });
  const code = el("textarea", { id: "edit-code", class: "code", spellcheck: "false" }, component.code || "");
  const expect = el("input", { type: "number", id: "edit-expect", min: 1, step: 1, "aria-describedby": "edit-expect-hint",
    value: source.expect_events_within ?? "" });
  const hasTimer = component.configurable_props.some((p) => p.type === "$.interface.timer");
  const catchUp = el("select", { id: "edit-catch-up" }, [["skip", "skip: run once, count the missed ticks skipped"],
    ["all", "all: run each missed tick, in order"]].map(([value, text]) => el("option", { value, selected: source.catch_up === value }, text)));
  const bodyOf = () => {
    const body = { name: name.value.trim() || undefined, configured_props: {} };
    for (const i of inputs) { const v = i.read(); if (v !== undefined) body.configured_props[i.prop.name] = v; }
    if (code.value !== (component.code || "")) body.component_code = code.value;
    return body;
  };
  let deployed = null;  // the props as deployed, to tell a change of them
  try { deployed = JSON.stringify(bodyOf().configured_props); } catch { /* a field to fix first */ }
  // A new version (code or props) is tried on the source's recorded runs and its diff shown before
  // it is deployed; a source with no run to try it on is deployed at once.
  const trialBox = el("section", { id: "trial-diff", hidden: true, "aria-live": "polite", "aria-label": "Trial on recorded runs" });
  const deployButton = el("button", { class: "primary", type: "submit" }, "Save and re-deploy");
  let shownFor = null;  // the version whose trial is on screen
  const versionOf = (body) => JSON.stringify([body.component_code, body.configured_props]);
  const changesVersion = (body) => body.component_code !== undefined || JSON.stringify(body.configured_props) !== deployed;
  const showTrial = async (body) => {
    trialBox.hidden = false;
    trialBox.replaceChildren(el("p", { class: "hint" }, "Trying it on the source's recorded runs…"));
    const trial = await tryOn(source.id, body);
    shownFor = versionOf(body);
    if (!trial || !trial.runs_tried) {
      trialBox.replaceChildren(el("p", { class: "hint" }, "No run on record to try it on."));
      return false;
    }
    trialBox.replaceChildren(el("h4", {}, "Tried on recorded runs"), ...trialView(trial).filter(Boolean));
    deployButton.textContent = "Deploy";
    return true;
  };
  const tryButton = el("button", { type: "button", id: "try-version", onclick: async () => {
    let body;
    try { body = bodyOf(); } catch { say("A JSON field is not valid JSON.", true); return; }
    try { await showTrial(body); } catch (err) { say(err.message, true); }
  } }, "Try on recorded runs");
  return el("form", { id: "edit-form", hidden: true, onsubmit: async (e) => {
    e.preventDefault();
    let body;
    try { body = bodyOf(); } catch { say("A JSON field is not valid JSON.", true); return; }
    const expected = expect.value.trim() === "" ? null : Number(expect.value);
    if (expected !== (source.expect_events_within ?? null)) body.expect_events_within = expected;
    if (hasTimer && catchUp.value !== source.catch_up) body.catch_up = catchUp.value;
    try {
      if (changesVersion(body) && shownFor !== versionOf(body) && await showTrial(body)) {
        say("Tried on the recorded runs: read the diff, then Deploy.");
        return;
      }
      await api(`/sources/${source.id}`, { method: "PUT", body });
      say("Saved and re-deployed.");
      refresh();
    } catch (err) { say(err.message, true); }
  } },
  el("h3", {}, "Edit and re-deploy"),
  el("label", { for: "edit-name" }, "Source name"), name,
  inputs.map((i) => i.node),
  el("label", { for: "edit-expect" }, "Expect an event within (seconds) ",
    el("span", { class: "hint", id: "edit-expect-hint" }, "(a source that emits nothing for this long is stalled: said on $errors and its badge; empty: no expectation)")),
  expect,
  hasTimer ? [el("label", { for: "edit-catch-up" }, "Missed ticks ", el("span", { class: "hint" }, "(ticks due while the service was down)")), catchUp] : null,
  el("label", { for: "edit-code" }, "Code ", el("span", { class: "hint" }, "(a change deploys the new code; the source keeps its id and state)")), code,
  trialBox,
  el("div", { class: "row" }, deployButton, tryButton,
    el("button", { type: "button", onclick: (e) => { e.target.closest("form").hidden = true; } }, "Cancel")));
}

function runByHand(id, runs) {
  const body = el("textarea", { id: "run-body", "aria-describedby": "run-hint" }, "{}");
  return el("section", {}, el("h3", {}, "Run it by hand"),
    el("label", { for: "run-body" }, "Event (JSON) ", el("span", { class: "hint", id: "run-hint" }, "becomes the run's event; a timer source gets its timer event when this is empty")),
    body,
    el("div", { class: "row" }, el("button", { class: "primary", onclick: async () => {
      let event;
      try { event = body.value.trim() ? JSON.parse(body.value) : undefined; } catch { say("The event is not valid JSON.", true); return; }
      try { await api(`/sources/${id}/run`, { method: "POST", body: event }); say("Run queued."); runs.awaitNew(); } catch (e) { say(e.message, true); }
    } }, "Run")));
}

export async function sourcePage(id) {
  const source = (await api(`/sources/${id}`)).data;
  const component = await componentOf(source);
  const [schedule, timezone] = await scheduleLine(source, component);
  const detail = eventDetail();
  const runs = runsPanel("sources", id);
  // a box of its own, drawn again in place (whether or not the page is on screen yet)
  const health = el("div", { id: "health-box" }, healthSection(await healthOf(id)));
  let drawing = Promise.resolve();  // one at a time, in order: the last drawn is the newest read
  const redrawHealth = () => {
    drawing = drawing.then(async () => {
      try { health.replaceChildren(healthSection(await healthOf(id))); } catch (e) { say(e.message, true); }
    });
  };
  // a live event: its run is listed; a stall's start or end (no run) and new runs draw the health again
  const panes = await eventPanes("sources", id, detail, (item, channel) => {
    const code = channel === "$errors" && item.event && item.event.error && item.event.error.code;
    if (code === "SOURCE_STALLED" || code === "SOURCE_RECOVERED") redrawHealth();
    else runs.awaitRunOf(item, channel);
  });
  await runs.load();
  runs.onNew(redrawHealth);
  const endpoint = Object.values(source.configured_props).find((v) => v && v.endpoint_url);
  const edit = component ? editForm(source, component, timezone) : null;
  const setActive = async (active) => {
    try { await api(`/sources/${id}`, { method: "PUT", body: { active } }); say(active ? "Resumed." : "Paused."); refresh(); }
    catch (e) { say(e.message, true); }
  };
  render(
    el("h2", {}, source.name, " ", el("span", { class: `badge ${source.active ? "ok" : "off"}`, id: "source-state" }, source.active ? "active" : "paused")),
    el("p", { class: "meta" }, el("span", {}, source.id),
      component ? el("span", {}, ` · ${component.name} v${component.version}`) : null,
      endpoint ? el("span", {}, " · endpoint ", el("code", { id: "endpoint", class: "url" }, endpoint.endpoint_url)) : null),
    schedule,
    el("div", { class: "row" },
      source.active ? el("button", { onclick: () => setActive(false) }, "Pause") : el("button", { class: "primary", onclick: () => setActive(true) }, "Resume"),
      edit ? el("button", { onclick: () => { edit.hidden = false; edit.querySelector("input, textarea, select").focus(); } }, "Edit") : null,
      el("button", { class: "danger", onclick: async () => {
        if (!confirm("Delete every retained event of this source?")) return;
        try { await api(`/sources/${id}/events`, { method: "DELETE" }); say("Deleting events…"); setTimeout(refresh, 1000); } catch (e) { say(e.message, true); }
      } }, "Delete events"),
      el("button", { class: "danger", onclick: async () => {
        if (!confirm(`Delete the source ${source.name}?`)) return;
        try { await api(`/sources/${id}`, { method: "DELETE" }); say("Source deleted."); location.hash = "#/sources"; } catch (e) { say(e.message, true); }
      } }, "Delete source")),
    health,
    configuration(source, component),
    edit,
    el("div", { class: "panes" }, panes.map((p) => p.pane)),
    detail,
    runs.panel,
    runByHand(id, runs),
    await stateSection(id),
    await subscriptionsSection(source));
}

