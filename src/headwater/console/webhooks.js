// Webhooks: the list (and creating one), and a webhook's page with every delivery and its
// attempts. A delivery the service will try again is "retrying", not "failed" (DECISIONS:
// Webhook deliveries): only a dead one, or one left with no next attempt, failed.

import { all, api, el, refresh, render, say, when, whenMs } from "./lib.js";

/** The word a delivery is shown with, and a note on it. */
export function deliveryLabel(d) {
  if (d.status === "succeeded") return { label: "delivered", note: "" };
  if (d.status === "pending") return { label: "pending", note: "first attempt queued" };
  if (d.status === "failed" && d.next_attempt_at) return { label: "retrying", note: `next attempt ${when(d.next_attempt_at)}` };
  return { label: "failed", note: d.status === "dead" ? "no more attempts" : "no attempt scheduled" };
}

const attemptText = (a) => `${a.status ?? "no answer"}${a.error ? ` (${a.error})` : ""}`;

function deliveryRow(hook, d) {
  const { label, note } = deliveryLabel(d);
  return el("tr", { "data-delivery": d.id },
    el("td", {}, el("a", { href: `#/sources/${d.emitter_id}` }, d.emitter_id), el("br"), el("span", { class: "hint" }, `event ${d.event_id}`)),
    el("td", {}, el("span", { class: `badge ${label}` }, label), note ? el("div", { class: "hint" }, note) : null),
    el("td", {}, d.attempts.length ? el("ol", { class: "attempts" }, d.attempts.map((a) =>
      el("li", {}, el("time", {}, whenMs(a.at_ms)), ` ${attemptText(a)}, ${a.duration_ms} ms`))) : el("span", { class: "hint" }, "none yet")),
    el("td", {}, el("button", { onclick: async () => {
      try { await api(`/webhooks/${hook.id}/deliveries/${d.id}/retry`, { method: "POST" }); say("Retry queued."); setTimeout(refresh, 1000); } catch (e) { say(e.message, true); }
    } }, "Retry")));
}

export async function webhookPage(id) {
  const hook = (await all("/users/me/webhooks")).find((w) => w.id === id);
  if (!hook) throw new Error(`No webhook ${id}.`);
  const [deliveries, subs] = await Promise.all([
    api(`/webhooks/${id}/deliveries`, { query: { limit: 100 } }).then((r) => r.data),
    api("/users/me/subscriptions").then((r) => r.data.filter((s) => s.listener_id === id))]);
  render(
    el("h2", {}, hook.name || "Webhook", " ", el("span", { class: `badge ${hook.active ? "ok" : "off"}` }, hook.active ? "active" : "disabled")),
    el("p", { class: "meta" }, `${hook.id} → `, el("code", { class: "url" }, hook.url)),
    hook.description ? el("p", {}, hook.description) : null,
    el("p", {}, subs.length ? ["Receives events of ", subs.map((s, i) => [i ? ", " : "", el("a", { href: `#/sources/${s.emitter_id}` }, s.emitter_id),
      s.event_name ? ` (${s.event_name})` : ""]), ". "] : "Subscribed to nothing yet: add it as a listener on a source's page. "),
    el("h3", {}, "Deliveries"),
    deliveries.length ? el("table", { id: "deliveries", class: "stack" },
      el("thead", {}, el("tr", {}, el("th", {}, "Event"), el("th", {}, "Status"), el("th", {}, "Attempts"), el("th", {}, ""))),
      el("tbody", {}, deliveries.map((d) => deliveryRow(hook, d))))
      : el("p", { class: "hint" }, "No deliveries yet."),
    el("div", { class: "row" }, el("button", { onclick: refresh }, "Refresh"), el("button", { class: "danger", onclick: async () => {
      if (!confirm("Delete this webhook?")) return;
      try { await api(`/webhooks/${id}`, { method: "DELETE" }); location.hash = "#/webhooks"; } catch (e) { say(e.message, true); }
    } }, "Delete webhook")));
}

export async function webhooksPage() {
  const hooks = await all("/users/me/webhooks");
  const url = el("input", { type: "url", id: "webhook-url", placeholder: "https://example.com/hook", required: true });
  const name = el("input", { type: "text", id: "webhook-name" });
  const secretBox = el("div", { "aria-live": "polite" });
  render(el("h2", {}, "Webhooks"),
    hooks.length ? el("ul", { class: "cards", id: "webhook-list" }, hooks.map((h) => el("li", {},
      el("a", { href: `#/webhooks/${h.id}` }, h.name || h.url), " ", el("span", { class: `badge ${h.active ? "ok" : "off"}` }, h.active ? "active" : "disabled"),
      el("div", { class: "hint url" }, h.url))))
      : el("p", {}, "No webhooks yet."),
    el("h3", {}, "New webhook"),
    el("form", { onsubmit: async (e) => {
      e.preventDefault();
      try {
        const hook = (await api("/webhooks", { method: "POST", query: { url: url.value, name: name.value || undefined } })).data;
        secretBox.replaceChildren(el("p", {}, "Signing secret (shown once): ", el("code", { class: "url" }, hook.signing_secret)),
          el("p", {}, el("a", { href: `#/webhooks/${hook.id}` }, "Open the new webhook")));
        say("Webhook created.");
      } catch (err) { say(err.message, true); }
    } }, el("label", { for: "webhook-url" }, "URL"), url, el("label", { for: "webhook-name" }, "Name ", el("span", { class: "hint" }, "optional")), name,
    el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Create webhook"))),
    secretBox);
}
