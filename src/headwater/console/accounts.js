// Connected accounts: the ones the caller may use (theirs and their orgs'), listed without their
// credentials (the API never answers them), connected with keys, and deleted.

import { all, api, el, refresh, render, say } from "./lib.js";

function accountRow(a) {
  return el("tr", {},
    el("td", {}, a.name), el("td", {}, a.app),
    el("td", {}, el("span", { class: `badge ${a.status === "active" ? "ok" : "off"}` }, a.status === "active" ? "active" : "reconnect")),
    el("td", {}, a.fields.join(", ") || "none"),
    el("td", { class: "wide" }, el("code", {}, a.id)),
    el("td", {}, el("button", { class: "danger", "aria-label": `Delete ${a.name}`, onclick: async () => {
      if (!confirm(`Delete ${a.name}? Sources using it fail until they are given another account.`)) return;
      try { await api(`/accounts/${a.id}`, { method: "DELETE" }); say("Account deleted."); refresh(); } catch (e) { say(e.message, true); }
    } }, "Delete")));
}

export async function accountsPage() {
  const accounts = await all("/accounts");
  const app = el("input", { type: "text", id: "account-app", placeholder: "slack", required: true });
  const name = el("input", { type: "text", id: "account-name" });
  const credentials = el("textarea", { id: "account-credentials", placeholder: '{"api_key": "…"}' });
  render(el("h2", {}, "Accounts"),
    el("p", { class: "hint" }, "An app prop given {\"authProvisionId\": \"apn_…\"} runs with the account's current credentials."),
    accounts.length ? el("table", { id: "accounts", class: "stack" },
      el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {}, "App"), el("th", {}, "Status"), el("th", {}, "Fields"),
        el("th", { class: "wide" }, "Id"), el("th", {}, ""))),
      el("tbody", {}, accounts.map(accountRow)))
      : el("p", {}, "No accounts yet."),
    el("h3", {}, "Connect an account with keys"),
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
    el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Connect account"))));
}
