// The events, logs and errors of a source or workflow: retained ones, then live ones as they come,
// each listed by its summary and time; one click opens it in the JSON inspector.

import { api, compareIds, el, follow, whenMs } from "./lib.js";

// Without a summary, one line of the event: an HTTP request's headers are left out of it (they
// would fill the line before its body); the whole event is one click away.
const preview = (event) => JSON.stringify(event && typeof event === "object" && !Array.isArray(event) && "headers" in event
  ? { ...event, headers: undefined } : event);

const describe = {
  "": (i) => i.metadata.summary || (preview(i.event) ?? "").slice(0, 160),
  "$logs": (i) => `${i.event.level}: ${i.event.message}`,
  "$errors": (i) => (i.event.error ? `${i.event.error.code}: ${i.event.error.message}` : JSON.stringify(i.event)),
};

const timeOf = (item) => item.indexed_at_ms || Number(item.id.split("-")[0]);

/** A collapsible tree of a JSON value: open on its first three levels, but for an HTTP
 * request's headers (folded: they would push its body out of view). */
export function tree(value, depth = 0) {
  if (value === null || typeof value !== "object" || !Object.keys(value).length) {
    return el("span", { class: `json-${value === null ? "null" : typeof value}` }, JSON.stringify(value));
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return el("ul", { class: "tree" }, entries.map(([k, v]) => {
    const leaf = v === null || typeof v !== "object" || !Object.keys(v).length;
    if (leaf) return el("li", {}, el("span", { class: "key" }, `${k}: `), tree(v, depth + 1));
    const size = Array.isArray(v) ? `[${v.length}]` : `{${Object.keys(v).length}}`;
    return el("li", {}, el("details", { open: depth < 3 && k !== "headers" }, el("summary", {}, el("span", { class: "key" }, `${k} `), el("span", { class: "hint" }, size)), tree(v, depth + 1)));
  }));
}

function inspect(target, item, channel) {
  target.replaceChildren(
    el("h3", {}, describe[channel](item)),
    el("p", { class: "hint" }, `${new Date(timeOf(item)).toLocaleString()} · event ${item.id}`),
    el("div", { class: "inspector", id: "event-tree" }, tree({ event: item.event, metadata: item.metadata })),
    el("details", {}, el("summary", {}, "Raw JSON"), el("pre", { class: "json", id: "event-json" }, JSON.stringify(item, null, 2))));
}

function addEvent(list, item, detail, channel) {
  if (list.querySelector(`[data-id="${CSS.escape(item.id)}"]`)) return;
  const li = el("li", { tabindex: "0", role: "button", "data-id": item.id,
    onclick: () => { list.querySelectorAll("li").forEach((x) => x.removeAttribute("aria-selected")); li.setAttribute("aria-selected", "true"); inspect(detail, item, channel); },
    onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); li.click(); } } },
  el("time", { datetime: new Date(timeOf(item)).toISOString() }, whenMs(timeOf(item))), " ", el("span", { class: "what" }, describe[channel](item)));
  const after = [...list.children].find((x) => compareIds(x.dataset.id, item.id) < 0);
  list.insertBefore(li, after || null);
}

/** The three panes of an emitter (`kind` is sources or workflows), filled and following;
 * `onLive(item, channel)` is told of each event that arrives live. */
export async function eventPanes(kind, id, detail, onLive = () => {}) {
  const panes = [["Events", "", "events"], ["Logs", "$logs", "logs"], ["Errors", "$errors", "errors"]].map(([title, channel, key]) => {
    const list = el("ul", { class: "events", id: `${key}-list`, "aria-label": title });
    return { pane: el("section", { class: "pane" }, el("h3", {}, title), list), list, channel };
  });
  await Promise.all(panes.map(async (p) => {
    const page = await api(`/${kind}/${id}/event_summaries`, { query: { expand: "event", event_name: p.channel } });
    page.data.forEach((item) => addEvent(p.list, item, detail, p.channel));
    // from the newest retained one: a live event is one not listed yet (what onLive is told of)
    follow(`/${kind}/${id}/sse`, p.channel, (item) => { addEvent(p.list, item, detail, p.channel); onLive(item, p.channel); },
      page.data.length ? page.data[0].id : undefined);
  }));
  return panes;
}

export function eventDetail() {
  return el("section", { id: "event-detail", "aria-live": "polite" }, el("p", { class: "hint" }, "Select an event to inspect it."));
}
