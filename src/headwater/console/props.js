// Props as people read them: labels and descriptions, type names in words, a timer with a unit
// or a schedule in words, and the form field of each prop (to deploy, or to edit a source).

import { api, el, say } from "./lib.js";

export const MASK = "********";  // how the API shows a secret value (never the value itself)

const TYPE_NAMES = {
  "$.interface.timer": "Timer", "$.interface.http": "HTTP endpoint", "$.service.db": "Data store",
  app: "App account", string: "Text", integer: "Whole number", boolean: "Yes or no", object: "JSON object",
  any: "Any JSON value", "string[]": "List of text", "integer[]": "List of whole numbers",
  "boolean[]": "List of yes/no", "object[]": "List of JSON objects",
};

export function typeName(type) {
  if (TYPE_NAMES[type]) return TYPE_NAMES[type];
  const app = /^\$\.([\w-]+)\.([\w-]+)$/.exec(type || "");
  return app ? `${app[1]} ${app[2]}` : type;
}

/** The prop's label; an interface without one is named by its type ("Timer", "HTTP endpoint"). */
export const labelOf = (prop) => prop.label || (prop.type.startsWith("$.interface.") ? typeName(prop.type) : prop.name);

const UNITS = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];

/** The largest unit that divides the interval: [count, unit seconds]. */
function splitInterval(seconds) {
  const [, size] = UNITS.find(([, s]) => seconds % s === 0);
  return [seconds / size, size];
}

export function intervalInWords(seconds) {
  const [count, size] = splitInterval(seconds);
  const [unit] = UNITS.find(([, s]) => s === size);
  return count === 1 ? `every ${unit}` : `every ${count} ${unit}s`;
}

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const DAY_SETS = { "*": "every day", "1-5": "on weekdays", "0,6": "on weekends", "6,0": "on weekends" };

/** Common cron shapes in words; any other is quoted as it is. */
export function cronInWords(cron, timezone) {
  const zone = timezone ? ` (${timezone})` : "";
  const [min, hour, dom, month, dow] = cron.trim().split(/\s+/);
  const num = (v) => /^\d+$/.test(v);
  if (dom === "*" && month === "*" && dow === "*") {
    if (min === "*" && hour === "*") return "every minute";
    const step = /^\*\/(\d+)$/.exec(min);
    if (step && hour === "*") return `every ${step[1]} minutes`;
    if (num(min) && hour === "*") return `every hour at minute ${min}`;
  }
  if (num(min) && num(hour) && dom === "*" && month === "*") {
    const at = `${hour.padStart(2, "0")}:${min.padStart(2, "0")}`;
    const days = DAY_SETS[dow] || (num(dow) ? `every ${DAYS[Number(dow) % 7]}` : null);
    if (days) return `${days} at ${at}${zone}`;
  }
  return `on the cron schedule ${cron}${zone}`;
}

export function timerInWords(timer) {
  return timer.cron ? cronInWords(timer.cron, timer.timezone) : intervalInWords(timer.interval_seconds ?? timer.intervalSeconds);
}

/** A configured value as text: a timer in words, a secret hidden, JSON for the rest. */
export function valueInWords(prop, value) {
  if (prop.type === "$.interface.timer") return value ? timerInWords(value) : "";
  if (prop.type === "$.interface.http") return value && value.endpoint_url;
  if (value === MASK || (value && value.$auth === MASK)) return "•••••••• (hidden)";
  if (prop.type === "boolean") return value ? "yes" : "no";
  if (Array.isArray(prop.options)) {
    const option = prop.options.find((o) => o !== null && typeof o === "object" && JSON.stringify(o.value) === JSON.stringify(value));
    if (option) return option.label;
  }
  return typeof value === "string" ? value : JSON.stringify(value);
}

function hint(prop) {
  const bits = [typeName(prop.type)];
  if (prop.optional) bits.push("optional");
  if (prop.min !== undefined && prop.max !== undefined) bits.push(`${prop.min} to ${prop.max}`);
  else if (prop.min !== undefined) bits.push(`at least ${prop.min}`);
  else if (prop.max !== undefined) bits.push(`at most ${prop.max}`);
  return bits.join(", ");
}

function timerInput(prop, id, label, current) {
  const start = current || prop.default || {};
  const seconds = start.interval_seconds ?? start.intervalSeconds;
  const [count, size] = seconds && !start.cron ? splitInterval(seconds) : ["", 60];
  const every = el("input", { type: "number", id, min: "1", value: count, "aria-describedby": `${id}-hint` });
  const unit = el("select", { id: `${id}-unit`, "aria-label": "Unit" },
    UNITS.map(([name, s]) => el("option", { value: s, selected: s === size }, `${name}s`)));
  const cron = el("input", { type: "text", id: `${id}-cron`, placeholder: "0 9 * * 1-5", value: start.cron ?? "" });
  const zone = el("input", { type: "text", id: `${id}-tz`, placeholder: "UTC", value: start.timezone ?? "" });
  return {
    node: el("div", { class: "field" }, label,
      el("div", { class: "row" }, el("span", {}, "Every"), el("span", { class: "short" }, every), unit),
      el("label", { for: `${id}-cron` }, "…or a cron expression ", el("span", { class: "hint" }, "minute hour day month weekday")), cron,
      el("label", { for: `${id}-tz` }, "Time zone of the cron expression ", el("span", { class: "hint" }, "IANA name, UTC when empty")), zone),
    read: () => {
      if (cron.value.trim()) return { cron: cron.value.trim(), ...(zone.value.trim() ? { timezone: zone.value.trim() } : {}) };
      return every.value ? { intervalSeconds: Number(every.value) * Number(unit.value) } : undefined;
    },
  };
}

function optionsInput(prop, id, label, componentId, current) {
  const chosen = JSON.stringify(current !== undefined ? current : prop.default);
  const select = el("select", { id }, el("option", { value: "" }, prop.optional ? "(none)" : "Choose…"));
  const fill = (options) => options.forEach((o) => {
    const value = typeof o === "object" && o !== null ? o.value : o;
    const text = typeof o === "object" && o !== null ? o.label : String(o);
    select.append(el("option", { value: JSON.stringify(value), selected: chosen === JSON.stringify(value) }, text));
  });
  if (prop.options) fill(prop.options);
  const load = prop.remoteOptions ? el("button", { type: "button", onclick: async () => {
    try { fill((await api(`/components/${componentId}/props/${prop.name}/options`, { method: "POST", body: { page: 0 } })).data.options || []); }
    catch (e) { say(e.message, true); }
  } }, "Load options") : null;
  return { node: el("div", { class: "field" }, label, el("div", { class: "row" }, select, load)),
    read: () => select.value ? JSON.parse(select.value) : undefined };
}

/**
 * The form field of one prop: { node, read }. `current` is the source's configured value when
 * editing; a secret is never in it (the API shows the mask), and one left empty is sent back
 * as the mask, which keeps the stored value.
 */
export function propInput(prop, componentId, current) {
  const id = `prop-${prop.name}`;
  const editing = current !== undefined;
  const label = el("label", { for: id }, labelOf(prop), " ", el("span", { class: "hint" }, `(${hint(prop)})`));
  const described = prop.description ? el("p", { class: "hint", id: `${id}-hint` }, prop.description) : null;
  const type = prop.type;
  if (type === "$.interface.http") {
    return { node: el("p", { class: "hint" }, `${labelOf(prop)}: an HTTP endpoint is made for this source.`), read: () => undefined };
  }
  if (type === "$.service.db" || type === "alert" || type === "dir") return { node: null, read: () => undefined };
  if (type === "$.interface.timer") {
    const field = timerInput(prop, id, label, current);
    if (described) field.node.insertBefore(described, field.node.children[1]);
    return field;
  }
  if (type === "boolean") {
    const box = el("input", { type: "checkbox", id, checked: editing ? current === true : prop.default === true });
    return { node: el("div", { class: "field" }, el("label", { for: id }, box, " ", labelOf(prop)), described), read: () => box.checked };
  }
  if (type === "app") {
    const auth = el("textarea", { id, placeholder: editing ? "unchanged (hidden)" : '{"api_key": "…"}' });
    return { node: el("div", { class: "field" }, label, described, auth),
      read: () => auth.value.trim() ? { $auth: JSON.parse(auth.value) } : editing ? { $auth: MASK } : { $auth: {} } };
  }
  if (prop.options || prop.remoteOptions) {
    const field = optionsInput(prop, id, label, componentId, current);
    if (described) field.node.insertBefore(described, field.node.children[1]);
    return field;
  }
  const secret = prop.secret === true || current === MASK;
  const multi = type.endsWith("[]") || type === "object" || type === "any";
  const start = editing ? current : prop.default;
  const input = multi ? el("textarea", { id, placeholder: type.endsWith("[]") ? '["a", "b"]' : "{}" })
    : el("input", { id, type: secret ? "password" : type === "integer" ? "number" : "text", autocomplete: "off",
      min: prop.min, max: prop.max, placeholder: secret && editing ? "unchanged (hidden)" : undefined,
      value: !secret && start !== undefined && typeof start !== "object" ? start : "" });
  if (multi && start !== undefined) input.value = JSON.stringify(start);
  return { node: el("div", { class: "field" }, label, described, input), read: () => {
    const raw = input.value;
    if (raw === "") return secret && editing ? MASK : undefined;
    if (multi) return JSON.parse(raw);
    if (type === "integer") return Number(raw);
    return raw;
  } };
}
