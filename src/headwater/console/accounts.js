// Connected accounts: the ones the caller may use (theirs and their orgs'), listed without their
// credentials (the API never answers them), connected with keys or with OAuth, reconnected, and
// deleted. OAuth connects and reconnects open the provider's authorize page in a new window; the
// page then watches the list until the account appears or changes (docs/oauth.md).

import { all, api, el, onLeave, refresh, render, say } from "./lib.js";

function seen(accounts) {
  return JSON.stringify(accounts.map((a) => [a.id, a.status, a.updated_at]));
}

async function authorize(body, accounts, pending) {
  const started = (await api("/oauth/connect", { method: "POST", body })).data;
  window.open(started.authorize_url, "_blank", "noopener");
  pending.replaceChildren(el("p", {}, "Authorize in the window that opened (or ",
    el("a", { href: started.authorize_url, target: "_blank", rel: "noopener" }, "open the authorize page"),
    "); this page updates when the account is connected."));
  const before = seen(accounts);
  const timer = setInterval(async () => {
    try {
      if (seen(await all("/accounts")) !== before) { clearInterval(timer); refresh(); }
    } catch (e) { clearInterval(timer); }
    if (Date.now() / 1000 > started.expires_at) clearInterval(timer);
  }, 1500);
  onLeave(() => clearInterval(timer));
}

function accountRow(a, reconnect) {
  return el("tr", {},
    el("td", {}, a.name), el("td", {}, a.app),
    el("td", {}, el("span", { class: `badge ${a.status === "active" ? "ok" : "off"}` }, a.status === "active" ? "active" : "reconnect")),
    el("td", {}, a.fields.join(", ") || "none"),
    el("td", { class: "wide" }, el("code", {}, a.id)),
    el("td", {}, a.kind === "oauth" ? el("button", { type: "button", "aria-label": `Reconnect ${a.name}`,
      onclick: () => reconnect(a) }, "Reconnect") : "", " ",
    el("button", { class: "danger", "aria-label": `Delete ${a.name}`, onclick: async () => {
      if (!confirm(`Delete ${a.name}? Sources using it fail until they are given another account.`)) return;
      try { await api(`/accounts/${a.id}`, { method: "DELETE" }); say("Account deleted."); refresh(); } catch (e) { say(e.message, true); }
    } }, "Delete")));
}

export async function accountsPage() {
  const accounts = await all("/accounts");
  const app = el("input", { type: "text", id: "account-app", placeholder: "slack", required: true });
  const name = el("input", { type: "text", id: "account-name" });
  const credentials = el("textarea", { id: "account-credentials", placeholder: '{"api_key": "…"}' });
  const pending = el("div", { "aria-live": "polite" });
  const reconnect = async (a) => {
    try { await authorize({ account_id: a.id }, accounts, pending); } catch (e) { say(e.message, true); }
  };
  render(el("h2", {}, "Accounts"),
    el("p", { class: "hint" }, "An app prop given {\"authProvisionId\": \"apn_…\"} runs with the account's current credentials."),
    accounts.length ? el("table", { id: "accounts", class: "stack" },
      el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {}, "App"), el("th", {}, "Status"), el("th", {}, "Fields"),
        el("th", { class: "wide" }, "Id"), el("th", {}, ""))),
      el("tbody", {}, accounts.map((a) => accountRow(a, reconnect))))
      : el("p", {}, "No accounts yet."),
    el("h3", {}, "Connect an account (with keys, or with OAuth)"),
    el("form", { onsubmit: async (e) => {
      e.preventDefault();
      let fields;
      try { fields = credentials.value.trim() ? JSON.parse(credentials.value) : {}; } catch { say("The credentials are not valid JSON.", true); return; }
      try {
        await api("/accounts", { method: "POST", body: { app: app.value, name: name.value || undefined, credentials: fields } });
        say("Account connected.");
        refresh();
      } catch (err) { say(err.message, true); }
    } },
    el("label", { for: "account-app" }, "App"), app,
    el("label", { for: "account-name" }, "Name ", el("span", { class: "hint" }, "optional")), name,
    el("label", { for: "account-credentials" }, "Credentials ", el("span", { class: "hint" }, "JSON; never shown again")), credentials,
    el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Connect account"),
      el("button", { type: "button", id: "connect-oauth", onclick: async () => {
        if (!app.value.trim()) { say("Give the app to connect.", true); return; }
        try { await authorize({ app: app.value.trim(), name: name.value.trim() || undefined }, accounts, pending); }
        catch (err) { say(err.message, true); }
      } }, "Connect with OAuth")),
    el("p", { class: "hint" }, "With OAuth, the credentials come from the app's provider: leave them empty.")),
    pending);
}
