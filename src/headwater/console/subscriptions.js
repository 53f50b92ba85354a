// A source's subscriptions: who listens to it (webhooks, sources, workflows) on which channel,
// what it listens to; add a listener, remove one.

import { all, api, el, refresh, say } from "./lib.js";

const CHANNELS = [["", "Events"], ["$errors", "Errors ($errors)"], ["$logs", "Logs ($logs)"]];
const channelName = (name) => (CHANNELS.find(([value]) => value === name) || [name, name])[1];

/** Names of everything that can emit or listen, by id. */
async function everything() {
  const [webhooks, sources, workflows] = await Promise.all([
    all("/users/me/webhooks"), all("/users/me/sources"), api("/users/me/workflows").then((r) => r.data)]);
  const names = new Map();
  webhooks.forEach((w) => names.set(w.id, `Webhook ${w.name || w.url}`));
  sources.forEach((s) => names.set(s.id, `Source ${s.name}`));
  workflows.forEach((w) => names.set(w.id, `Workflow ${w.name}`));
  return { webhooks, sources, workflows, names };
}

const linkTo = (id, names) => {
  const href = id.startsWith("wh_") ? `#/webhooks/${id}` : id.startsWith("dc_") ? `#/sources/${id}` : id.startsWith("p_") ? `#/workflows/${id}` : null;
  const text = names.get(id) || id;
  return href ? el("a", { href }, text) : text;
};

export async function subscriptionsSection(source) {
  const [subs, known] = await Promise.all([api("/users/me/subscriptions").then((r) => r.data), everything()]);
  const listeners = subs.filter((s) => s.emitter_id === source.id);
  const emitters = subs.filter((s) => s.listener_id === source.id);
  const remove = (s) => el("button", { class: "danger", "aria-label": `Remove ${known.names.get(s.listener_id) || s.listener_id}`, onclick: async () => {
    try {
      await api("/subscriptions", { method: "DELETE", query: { emitter_id: s.emitter_id, listener_id: s.listener_id, event_name: s.event_name } });
      say("Subscription removed.");
      refresh();
    } catch (e) { say(e.message, true); }
  } }, "Remove");
  const listener = el("select", { id: "listener", required: true }, el("option", { value: "" }, "Choose a listener…"),
    el("optgroup", { label: "Webhooks" }, known.webhooks.map((w) => el("option", { value: w.id }, w.name || w.url))),
    el("optgroup", { label: "Sources" }, known.sources.filter((s) => s.id !== source.id).map((s) => el("option", { value: s.id }, s.name))),
    el("optgroup", { label: "Workflows" }, known.workflows.map((w) => el("option", { value: w.id }, w.name))));
  const channel = el("select", { id: "listener-channel" }, CHANNELS.map(([value, text]) => el("option", { value }, text)));
  return el("section", { id: "subscriptions" },
    el("h3", {}, "Subscriptions"),
    listeners.length ? el("table", { id: "listeners", "aria-label": "Listeners" },
      el("thead", {}, el("tr", {}, el("th", {}, "Listener"), el("th", {}, "Channel"), el("th", {}, ""))),
      el("tbody", {}, listeners.map((s) => el("tr", {}, el("td", {}, linkTo(s.listener_id, known.names)), el("td", {}, channelName(s.event_name)), el("td", {}, remove(s))))))
      : el("p", { class: "hint", id: "no-listeners" }, "Nobody listens to this source yet."),
    emitters.length ? el("p", {}, "This source listens to ", emitters.map((s, i) => [i ? ", " : "", linkTo(s.emitter_id, known.names)]), ".") : null,
    el("form", { class: "row", onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api("/subscriptions", { method: "POST", query: { emitter_id: source.id, listener_id: listener.value, event_name: channel.value || undefined } });
        say("Listener added.");
        refresh();
      } catch (err) { say(err.message, true); }
    } },
    el("label", { for: "listener", class: "inline" }, "Add a listener"), listener,
    el("label", { for: "listener-channel", class: "inline" }, "of"), channel,
    el("button", { class: "primary", type: "submit" }, "Subscribe")));
}
