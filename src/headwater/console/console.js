// The Headwater console: a small single-page app over the /v1 API, no build step, no CDN. This
// module holds the routes and the small pages; the others are modules of their own (lib.js has
// the helpers: every API value reaches the page as text, never as HTML).

import { accountsPage } from "./accounts.js";
import { deployPage } from "./deploy.js";
import { eventDetail, eventPanes } from "./events.js";
import { KEY, api, el, leave, main, say, signOut, when } from "./lib.js";
import { registryComponentPage, registryPage } from "./registry.js";
import { runsPanel } from "./runs.js";
import { sourcePage } from "./source.js";
import { webhookPage, webhooksPage } from "./webhooks.js";

// ---- pages ---------------------------------------------------------------------------------

function loginPage() {
  document.getElementById("nav").hidden = true;
  const key = el("input", { type: "password", id: "api-key", autocomplete: "off", required: true });
  const form = el("form", { onsubmit: async (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, key.value.trim());
    try {
      const me = await api("/users/me");
      say(`Signed in as ${me.data.username}.`);
      location.hash = "#/sources";
    } catch (err) {
      sessionStorage.removeItem(KEY);
      say(err.message, true);
    }
  } },
  el("h2", {}, "Sign in"),
  el("label", { for: "api-key" }, "API key ", el("span", { class: "hint" }, "(hw_…, from `headwater users create` or `headwater keys create`)")),
  key,
  el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Sign in")));
  main.replaceChildren(form);
  key.focus();
}

async function sourcesPage() {
  const me = (await api("/users/me")).data;
  const lists = [["Your sources", await api("/users/me/sources", { query: { limit: 100 } })]];
  for (const org of me.orgs) lists.push([`${org.name} (org)`, await api(`/orgs/${org.id}/sources`, { query: { limit: 100 } })]);
  const sections = lists.map(([title, page]) => el("section", {},
    el("h3", {}, title),
    page.data.length ? el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {}, "State"), el("th", { class: "wide" }, "Id"), el("th", { class: "wide" }, "Created"))),
      el("tbody", {}, page.data.map((s) => el("tr", {},
        el("td", {}, el("a", { href: `#/sources/${s.id}` }, s.name)),
        el("td", {}, el("span", { class: `badge ${s.active ? "ok" : "off"}` }, s.active ? "active" : "paused")),
        el("td", { class: "wide" }, s.id),
        el("td", { class: "wide" }, when(s.created_at))))))
      : el("p", {}, "No sources yet. ", el("a", { href: "#/deploy" }, "Deploy one."))));
  main.replaceChildren(el("h2", {}, "Sources"), ...sections);
}

async function workflowsPage() {
  const workflows = (await api("/users/me/workflows")).data;
  main.replaceChildren(el("h2", {}, "Workflows"),
    el("p", { class: "hint" }, "Deploy them with `headwater workflows deploy FILE.yaml` (after `headwater login`)."),
    workflows.length ? el("ul", {}, workflows.map((w) => el("li", {}, el("a", { href: `#/workflows/${w.id}` }, w.name), ` — ${w.steps.length} steps, ${w.deployment_id}`)))
      : el("p", {}, "No workflows yet."));
}

async function workflowPage(id) {
  const detail = eventDetail();
  const runs = runsPanel("workflows", id);
  const panes = await eventPanes("workflows", id, detail, (item, channel) => runs.awaitRunOf(item, channel));
  await runs.load();
  main.replaceChildren(el("h2", {}, `Workflow ${id}`), el("div", { class: "panes" }, panes.map((p) => p.pane)), detail, runs.panel);
}

async function usagePage() {
  const me = (await api("/users/me")).data;
  const rows = Object.entries(me).filter(([k]) => !["orgs"].includes(k));
  main.replaceChildren(el("h2", {}, "Usage"),
    el("table", { id: "usage" }, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, String(v)))))),
    el("h3", {}, "Orgs"), me.orgs.length ? el("ul", {}, me.orgs.map((o) => el("li", {}, `${o.name} (${o.id})`))) : el("p", {}, "None."));
}

// ---- routing -------------------------------------------------------------------------------

async function route() {
  leave();
  const hash = location.hash || "#/sources";
  if (!sessionStorage.getItem(KEY) || hash === "#/login") { loginPage(); return; }
  document.getElementById("nav").hidden = false;
  const [, page, id] = hash.slice(1).split("/");
  main.replaceChildren(el("p", {}, "Loading…"));
  try {
    if (page === "sources" && id) await sourcePage(id);
    else if (page === "deploy") await deployPage(id && decodeURIComponent(id));
    else if (page === "webhooks" && id) await webhookPage(id);
    else if (page === "webhooks") await webhooksPage();
    else if (page === "registry" && id) await registryComponentPage(decodeURIComponent(id));
    else if (page === "registry") await registryPage();
    else if (page === "workflows" && id) await workflowPage(id);
    else if (page === "workflows") await workflowsPage();
    else if (page === "usage") await usagePage();
    else if (page === "accounts") await accountsPage();
    else await sourcesPage();
    main.focus();
  } catch (e) {
    main.replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
  }
}

document.getElementById("sign-out").addEventListener("click", signOut);
// One page drawn at a time: a page asked for while another is still loading waits for it, so
// the streams of the first are closed (leave()) before the second opens its own.
let drawing = Promise.resolve();
const draw = () => { drawing = drawing.then(route); };
window.addEventListener("hashchange", draw);
draw();
