// A source's health at a glance (GET /v1/sources/{id}/health): its status badge, its last run,
// event and tick, its counts over the last hour and day, a stall, skipped ticks, and a chart of
// runs, events and errors over time drawn here as inline SVG (no library, no CDN). Every value
// reaches the page as text: SVG text nodes too.

import { api, el, onLeave, when } from "./lib.js";

const SVG = "http://www.w3.org/2000/svg";
const SERIES = [["runs", "Runs"], ["events", "Events"], ["errors", "Errors"]];  // colours in console.css

/** ok, erroring (errors in the last hour), stalled or paused: the badge's label and class. */
export function statusOf(health) {
  if (!health.active) return ["paused", "off"];
  if (health.stalled) return ["stalled", "stalled"];
  if (health.last_hour.errors > 0) return ["erroring", "failed"];
  return ["ok", "ok"];
}

export function healthBadge(health, attrs = {}) {
  const [label, cls] = statusOf(health);
  return el("span", { ...attrs, class: `badge ${cls}` }, label);
}

export async function healthOf(id) {
  return (await api(`/sources/${id}/health`)).data;
}

/** Seconds in words, for an expectation: 90 → "90 seconds", 7200 → "2 hours". */
export function secondsInWords(s) {
  for (const [n, unit] of [[86400, "day"], [3600, "hour"], [60, "minute"]]) {
    if (s >= n && s % n === 0) return `${s / n} ${unit}${s === n ? "" : "s"}`;
  }
  return `${s} second${s === 1 ? "" : "s"}`;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) if (value !== undefined && value !== null) node.setAttribute(name, value);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A round upper bound for the y axis and its three ticks, whole numbers: 0..1, 0 2 4, 0 4 8, 0 10 20... */
function scaleTo(max) {
  if (max <= 1) return [1, [0, 1]];
  const step = 10 ** Math.floor(Math.log10(max));
  const top = [1, 2, 4, 6, 8, 10].map((m) => m * step).find((t) => t >= max);
  return [top, [0, top / 2, top]];
}

const clock = (start, withDay) => new Date(start * 1000).toLocaleTimeString([], withDay
  ? { weekday: "short", hour: "2-digit", minute: "2-digit" } : { hour: "2-digit", minute: "2-digit" });

/** A grouped bar chart of buckets ({start, runs, events, errors}, oldest first), `step` seconds
 * each, `width` pixels wide (drawn at the size it is shown, so its text is the page's size). */
export function activityChart(buckets, step, title, width) {
  const W = Math.max(280, Math.round(width)), H = 200, left = 44, right = 12, top = 12, bottom = 40;
  const plotW = W - left - right, plotH = H - top - bottom;
  const [ymax, ticks] = scaleTo(Math.max(0, ...buckets.flatMap((b) => SERIES.map(([k]) => b[k] || 0))));
  const slot = plotW / Math.max(1, buckets.length);
  const bar = Math.max(1, (slot * 0.8) / SERIES.length);
  const y = (v) => top + plotH - (v / ymax) * plotH;
  const labelEvery = Math.ceil(buckets.length / Math.max(2, Math.floor(plotW / 72)));  // labels ~72 px apart at least
  const id = `chart-title-${step}`;
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "chart", role: "img", "aria-labelledby": id },
    svg("title", { id }, title),
    ticks.map((t) => [
      svg("line", { x1: left, x2: W - right, y1: y(t), y2: y(t), class: "grid" }),
      svg("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" }, String(t))]),
    svg("text", { x: 12, y: top + plotH / 2, transform: `rotate(-90 12 ${top + plotH / 2})`, "text-anchor": "middle", class: "axis" }, "count"),
    buckets.map((b, i) => svg("g", { "data-start": b.start },
      SERIES.map(([key, name], j) => {
        const v = b[key] || 0;
        return v ? svg("rect", { x: left + i * slot + slot * 0.1 + j * bar, y: y(v), width: Math.max(1, bar - 1), height: top + plotH - y(v), class: `bar ${key}` },
          svg("title", {}, `${clock(b.start, step >= 3600)}: ${v} ${name.toLowerCase()}`)) : null;
      }),
      i % labelEvery === 0 ? svg("text", { x: left + i * slot + slot / 2, y: H - bottom + 16, "text-anchor": "middle", class: "tick" }, clock(b.start, false)) : null)),
    ymax === 1 && !buckets.some((b) => SERIES.some(([k]) => b[k])) ? svg("text", { x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle", class: "axis" }, "No runs, events or errors in this time.") : null,
    svg("line", { x1: left, x2: W - right, y1: top + plotH, y2: top + plotH, class: "axis-line" }),
    svg("text", { x: left + plotW / 2, y: H - 6, "text-anchor": "middle", class: "axis" },
      step >= 3600 ? "hour (each bar: one hour)" : "time (each bar: five minutes)"));
}

function legend() {
  return el("ul", { class: "legend", "aria-hidden": "true" }, SERIES.map(([key, name]) =>
    el("li", {}, el("span", { class: `swatch ${key}` }), name)));
}

function countsRow(title, c) {
  return el("tr", {}, el("th", { scope: "row" }, title), el("td", {}, String(c.runs)), el("td", {}, String(c.events)),
    el("td", { class: c.errors ? "error" : "" }, String(c.errors)), el("td", {}, String(c.skipped_ticks ?? "")));
}

/** The health section of a source's page. */
export function healthSection(health) {
  const views = { hour: ["Last hour", health.series.five_minutes, 300], day: ["Last day", health.series.hours, 3600] };
  const holder = el("div", { class: "chart-holder" });
  const buttons = {};
  let view = "hour";
  let drawnWidth = 0;
  const draw = () => {
    const [label, buckets, step] = views[view];
    drawnWidth = holder.clientWidth;
    holder.replaceChildren(activityChart(buckets, step, `Runs, events and errors, ${label.toLowerCase()}`, drawnWidth - 14));
    Object.entries(buttons).forEach(([n, b]) => b.setAttribute("aria-pressed", String(n === view)));
  };
  // drawn once the holder is laid out, and again when its width changes (a window resized)
  const sizes = new ResizeObserver(() => {
    if (!holder.isConnected) { if (drawnWidth) sizes.disconnect(); }  // drawn, then taken away: drawn again anew
    else if (holder.clientWidth && holder.clientWidth !== drawnWidth) draw();
  });
  sizes.observe(holder);
  onLeave(() => sizes.disconnect());
  for (const name of Object.keys(views)) {
    buttons[name] = el("button", { type: "button", "aria-pressed": String(name === view), onclick: () => { view = name; draw(); } }, views[name][0]);
  }
  const stall = health.stalled
    ? el("p", { class: "error", id: "stall", role: "alert" }, `Stalled since ${when(health.stalled_since)}: `,
      health.stalled_why === "timer" ? "its timer's tick did not run within two intervals." : "it emitted no event within the time expected.")
    : null;
  const facts = [
    ["Last run", health.last_run_at ? when(health.last_run_at) : "never"],
    ["Last event", health.last_event_at ? when(health.last_event_at) : "never"],
    health.next_tick_at || health.last_tick_at ? ["Next tick", health.next_tick_at ? when(health.next_tick_at) : "none (paused)"] : null,
    ["Expects an event within", health.expect_events_within ? secondsInWords(health.expect_events_within) : "no expectation"],
    health.last_tick_at || health.next_tick_at ? ["Missed ticks", `${health.catch_up === "all" ? "each run (catch-up all)" : "run once (catch-up skip)"}; ${health.skipped_ticks} skipped so far`] : null,
  ].filter(Boolean);
  return el("section", { id: "health" },
    el("h3", {}, "Health ", healthBadge(health, { id: "health-status" })),
    stall,
    el("div", { class: "health-grid" },
      el("table", { class: "config", id: "health-facts" }, el("tbody", {}, facts.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, v))))),
      el("table", { id: "health-counts", "aria-label": "Runs, events and errors" },
        el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "Runs"), el("th", {}, "Events"), el("th", {}, "Errors"), el("th", {}, "Skipped ticks"))),
        el("tbody", {}, countsRow("Last hour", health.last_hour), countsRow("Last day", health.last_day)))),
    el("div", { class: "row" }, el("span", { class: "hint" }, "Chart:"), Object.values(buttons), legend()),
    holder);
}
