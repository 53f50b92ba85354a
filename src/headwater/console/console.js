// The Headwater console: a small single-page app over the /v1 API, no build step, no CDN.
// Every value from the API reaches the page as text nodes (never as HTML), so event data
// cannot inject markup. The API key lives in sessionStorage: gone when the tab closes.

const KEY = "headwater.apiKey";
const main = document.getElementById("main");
const statusBox = document.getElementById("status");
let leaving = [];  // cleanups of the current page (open event streams)

// ---- helpers -------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(message, isError = false) {
  const note = el("div", { class: isError ? "error" : "" }, message);
  statusBox.append(note);
  setTimeout(() => note.remove(), isError ? 8000 : 4000);
}

async function api(path, { method = "GET", body, query } = {}) {
  const url = new URL("/v1" + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null) url.searchParams.set(k, v);
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY)}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 401) { signOut(); throw new Error("Your API key is not valid any more."); }
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const details = data && data.details ? " " + Object.entries(data.details).map(([f, p]) => `${f}: ${p.join("; ")}`).join(" · ") : "";
    throw new Error(((data && data.error) || `The service answered ${response.status}.`) + details);
  }
  return data;
}

// Server-sent events over fetch (EventSource cannot send the Authorization header); reconnects
// with Last-Event-ID, so nothing retained is missed across a dropped connection.
function follow(path, channel, onItem) {
  const controller = new AbortController();
  let last = "0-0";
  let stopped = false;
  (async () => {
    while (!stopped) {
      try {
        const url = new URL("/v1" + path, location.origin);
        url.searchParams.set("event_name", channel);
        const response = await fetch(url, { signal: controller.signal, headers: {
          Authorization: `Bearer ${sessionStorage.getItem(KEY)}`, "Last-Event-ID": last } });
        if (!response.ok) { await new Promise((r) => setTimeout(r, 2000)); continue; }
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
            if (!data) continue;
            const item = JSON.parse(data);
            last = item.id;
            onItem(item);
          }
        }
      } catch (e) {
        if (stopped) return;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  })();
  const stop = () => { stopped = true; controller.abort(); };
  leaving.push(stop);
  return { setLast: (id) => { last = id; } };
}

function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "";
}

function compareIds(a, b) {
  const [am, as] = a.split("-").map(Number);
  const [bm, bs] = b.split("-").map(Number);
  return am - bm || as - bs;
}

// ---- pages ---------------------------------------------------------------------------------

function signOut() {
  sessionStorage.removeItem(KEY);
  location.hash = "#/login";
}

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
        el("td", {}, el("span", { class: "badge" }, s.active ? "active" : "inactive")),
        el("td", { class: "wide" }, s.id),
        el("td", { class: "wide" }, when(s.created_at))))))
      : el("p", {}, "No sources yet. ", el("a", { href: "#/deploy" }, "Deploy one."))));
  main.replaceChildren(el("h2", {}, "Sources"), ...sections);
}

function eventList(title, id) {
  const list = el("ul", { class: "events", id, "aria-label": title });
  return { pane: el("section", { class: "pane" }, el("h3", {}, title), list), list };
}

function showEvent(target, item) {
  target.replaceChildren(el("h3", {}, `Event ${item.id}`), el("pre", { class: "json", id: "event-json" }, JSON.stringify(item, null, 2)));
}

function addEvent(list, item, detail, label) {
  if (list.querySelector(`[data-id="${CSS.escape(item.id)}"]`)) return;
  const li = el("li", { tabindex: "0", role: "button", "data-id": item.id,
    onclick: () => { list.querySelectorAll("li").forEach((x) => x.removeAttribute("aria-selected")); li.setAttribute("aria-selected", "true"); showEvent(detail, item); },
    onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); li.click(); } } },
  label(item));
  const after = [...list.children].find((x) => compareIds(x.dataset.id, item.id) < 0);
  list.insertBefore(li, after || null);
}

// One line per event: an HTTP request's headers are left out of it (they would fill the line
// before its body); the whole event is one click away.
const preview = (event) => JSON.stringify(event && typeof event === "object" && !Array.isArray(event) && "headers" in event
  ? { ...event, headers: undefined } : event);

const labels = {
  "": (i) => `${i.id}  ${(preview(i.event) ?? "").slice(0, 160)}`,
  "$logs": (i) => `${i.event.level}: ${i.event.message}`,
  "$errors": (i) => `${i.event.error ? i.event.error.code + ": " + i.event.error.message : JSON.stringify(i.event)}`,
};

async function eventPanes(kind, id, detail) {
  const panes = [["Events", "", "events"], ["Logs", "$logs", "logs"], ["Errors", "$errors", "errors"]].map(([title, channel, key]) => {
    const { pane, list } = eventList(title, `${key}-list`);
    return { pane, list, channel };
  });
  for (const p of panes) {
    const page = await api(`/${kind}/${id}/event_summaries`, { query: { expand: "event", event_name: p.channel } });
    page.data.forEach((item) => addEvent(p.list, item, detail, labels[p.channel]));
    const stream = follow(`/${kind}/${id}/sse`, p.channel, (item) => addEvent(p.list, item, detail, labels[p.channel]));
    if (page.data.length) stream.setLast(page.data[0].id);
  }
  return panes;
}

async function sourcePage(id) {
  const source = (await api(`/sources/${id}`)).data;
  const detail = el("section", { id: "event-detail", "aria-live": "polite" }, el("p", { class: "hint" }, "Select an event to see its JSON."));
  const panes = await eventPanes("sources", id, detail);
  const endpoint = Object.values(source.configured_props).find((v) => v && v.endpoint_url);
  const body = el("textarea", { id: "run-body", "aria-describedby": "run-hint" }, "{}");
  main.replaceChildren(
    el("h2", {}, source.name, " ", el("span", { class: "badge" }, source.active ? "active" : "inactive")),
    el("p", {}, source.id, endpoint ? el("span", {}, " · endpoint ", el("code", { id: "endpoint" }, endpoint.endpoint_url)) : null),
    el("div", { class: "panes" }, panes.map((p) => p.pane)),
    detail,
    el("h3", {}, "Run it by hand"),
    el("label", { for: "run-body" }, "Event (JSON) ", el("span", { class: "hint", id: "run-hint" }, "becomes the run's event; a timer source gets its timer event when this is empty")),
    body,
    el("div", { class: "row" },
      el("button", { class: "primary", onclick: async () => {
        let event;
        try { event = body.value.trim() ? JSON.parse(body.value) : undefined; } catch { say("The event is not valid JSON.", true); return; }
        try { await api(`/sources/${id}/run`, { method: "POST", body: event }); say("Run queued."); } catch (e) { say(e.message, true); }
      } }, "Run"),
      el("button", { class: "danger", onclick: async () => {
        if (!confirm("Delete every retained event of this source?")) return;
        try { await api(`/sources/${id}/events`, { method: "DELETE" }); say("Deleting events…"); setTimeout(route, 1000); } catch (e) { say(e.message, true); }
      } }, "Delete events"),
      el("button", { class: "danger", onclick: async () => {
        if (!confirm(`Delete the source ${source.name}?`)) return;
        try { await api(`/sources/${id}`, { method: "DELETE" }); say("Source deleted."); location.hash = "#/sources"; } catch (e) { say(e.message, true); }
      } }, "Delete source")));
}

function propInput(prop, componentId) {
  const id = `prop-${prop.name}`;
  const label = el("label", { for: id }, prop.label || prop.name, " ",
    el("span", { class: "hint" }, `${prop.type}${prop.optional ? ", optional" : ""}${prop.description ? " — " + prop.description : ""}`));
  const type = prop.type;
  if (type === "$.interface.http") return { node: el("p", { class: "hint" }, `${prop.name}: an HTTP endpoint is made for this source.`), read: () => undefined };
  if (type === "$.service.db" || type === "alert" || type === "dir") return { node: null, read: () => undefined };
  if (type === "$.interface.timer") {
    const d = prop.default || {};
    const interval = el("input", { type: "number", id, min: "1", value: d.intervalSeconds ?? "" });
    const cron = el("input", { type: "text", id: `${id}-cron`, placeholder: "0 9 * * 1-5", value: d.cron ?? "" });
    return { node: el("div", {}, label, interval, el("label", { for: `${id}-cron` }, "…or a cron expression"), cron),
      read: () => cron.value.trim() ? { cron: cron.value.trim() } : interval.value ? { intervalSeconds: Number(interval.value) } : undefined };
  }
  if (type === "boolean") {
    const box = el("input", { type: "checkbox", id, checked: prop.default === true });
    return { node: el("div", {}, el("label", { for: id }, box, " ", prop.label || prop.name)), read: () => box.checked };
  }
  if (type === "app") {
    const auth = el("textarea", { id, placeholder: '{"api_key": "…"}' });
    const account = el("select", { id: `${id}-account`, "aria-label": `${prop.name}: connected account` },
      el("option", { value: "" }, "Credentials below…"));
    api("/accounts", { query: { limit: 100 } }).then(({ data }) => data.filter((a) => !prop.app || a.app === prop.app)
      .forEach((a) => account.append(el("option", { value: a.id }, `${a.name} (${a.id})`)))).catch(() => {});
    return { node: el("div", {}, label, account, auth),
      read: () => account.value ? { authProvisionId: account.value } : auth.value.trim() ? { $auth: JSON.parse(auth.value) } : { $auth: {} } };
  }
  if (prop.options || prop.remoteOptions) {
    const select = el("select", { id }, el("option", { value: "" }, prop.optional ? "(none)" : "Choose…"));
    const fill = (options) => options.forEach((o) => {
      const value = typeof o === "object" && o !== null ? o.value : o;
      const text = typeof o === "object" && o !== null ? o.label : String(o);
      select.append(el("option", { value: JSON.stringify(value), selected: JSON.stringify(prop.default) === JSON.stringify(value) }, text));
    });
    if (prop.options) fill(prop.options);
    const load = prop.remoteOptions ? el("button", { type: "button", onclick: async () => {
      try { fill((await api(`/components/${componentId}/props/${prop.name}/options`, { method: "POST", body: { page: 0 } })).data.options || []); }
      catch (e) { say(e.message, true); }
    } }, "Load options") : null;
    return { node: el("div", {}, label, el("div", { class: "row" }, select, load)), read: () => select.value ? JSON.parse(select.value) : undefined };
  }
  const secret = prop.secret === true;
  const multi = type.endsWith("[]") || type === "object" || type === "any";
  const input = multi ? el("textarea", { id, placeholder: type.endsWith("[]") ? '["a", "b"]' : "{}" })
    : el("input", { id, type: secret ? "password" : type === "integer" ? "number" : "text", autocomplete: "off",
      min: prop.min, max: prop.max, value: prop.default !== undefined && typeof prop.default !== "object" ? prop.default : "" });
  if (multi && prop.default !== undefined) input.value = JSON.stringify(prop.default);
  return { node: el("div", {}, label, input), read: () => {
    const raw = input.value;
    if (raw === "") return undefined;
    if (multi) return JSON.parse(raw);
    if (type === "integer") return Number(raw);
    return raw;
  } };
}

async function deployPage() {
  const registry = (await api("/components/registry", { query: { limit: 100 } })).data.filter((c) => c.type !== "action");
  const picker = el("select", { id: "registry-component" }, el("option", { value: "" }, "Choose a published component…"),
    registry.map((c) => el("option", { value: c.key }, `${c.name} (${c.key})`)));
  const code = el("textarea", { id: "component-code", placeholder: "export default { name: …, props: {…}, run(event) {…} }" });
  const formArea = el("section", { id: "props-form" });
  const showForm = (component) => {
    const inputs = component.configurable_props.map((p) => ({ prop: p, ...propInput(p, component.id) }));
    const name = el("input", { type: "text", id: "source-name", placeholder: component.name });
    formArea.replaceChildren(el("form", { onsubmit: async (e) => {
      e.preventDefault();
      const configured = {};
      try {
        for (const i of inputs) { const v = i.read(); if (v !== undefined) configured[i.prop.name] = v; }
      } catch { say("A JSON field is not valid JSON.", true); return; }
      try {
        const source = (await api("/sources", { method: "POST", body: { component_id: component.id, name: name.value || undefined, configured_props: configured } })).data;
        say(`Deployed ${source.name}.`);
        location.hash = `#/sources/${source.id}`;
      } catch (err) { say(err.message, true); }
    } },
    el("h3", {}, `Configure ${component.name}`),
    el("label", { for: "source-name" }, "Source name ", el("span", { class: "hint" }, "optional")), name,
    inputs.map((i) => i.node),
    el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Deploy"))));
    formArea.querySelector("input, select, textarea")?.focus();
  };
  main.replaceChildren(el("h2", {}, "Deploy a source"),
    el("label", { for: "registry-component" }, "From the registry"),
    el("div", { class: "row" }, picker, el("button", { type: "button", id: "use-registry", onclick: async () => {
      if (!picker.value) return;
      try { showForm((await api(`/components/registry/${picker.value}`)).data); } catch (e) { say(e.message, true); }
    } }, "Use it")),
    el("label", { for: "component-code" }, "…or paste component code"), code,
    el("div", { class: "row" }, el("button", { type: "button", id: "use-code", onclick: async () => {
      try { showForm((await api("/components", { method: "POST", body: { component_code: code.value } })).data); } catch (e) { say(e.message, true); }
    } }, "Load its props")),
    formArea);
}

async function webhooksPage() {
  const hooks = (await api("/users/me/webhooks", { query: { limit: 100 } })).data;
  const url = el("input", { type: "url", id: "webhook-url", placeholder: "https://example.com/hook", required: true });
  const name = el("input", { type: "text", id: "webhook-name" });
  const secretBox = el("div", { "aria-live": "polite" });
  const rows = [];
  for (const hook of hooks) {
    const deliveries = (await api(`/webhooks/${hook.id}/deliveries`, { query: { limit: 20 } })).data;
    rows.push(el("section", { class: "pane" },
      el("h3", {}, hook.name || hook.url, " ", el("span", { class: "badge" }, hook.active ? "active" : "disabled")),
      el("p", {}, hook.id, " → ", el("code", {}, hook.url)),
      deliveries.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Event"), el("th", {}, "Status"), el("th", {}, "Attempts"), el("th", {}, ""))),
        el("tbody", {}, deliveries.map((d) => el("tr", {},
          el("td", {}, `${d.emitter_id} ${d.event_id}`), el("td", {}, d.status),
          el("td", {}, d.attempts.map((a) => `${a.status ?? "—"}${a.error ? " (" + a.error + ")" : ""}`).join(", ")),
          el("td", {}, el("button", { onclick: async () => {
            try { await api(`/webhooks/${hook.id}/deliveries/${d.id}/retry`, { method: "POST" }); say("Retry queued."); } catch (e) { say(e.message, true); }
          } }, "Retry"))))))
        : el("p", { class: "hint" }, "No deliveries yet."),
      el("button", { class: "danger", onclick: async () => {
        if (!confirm("Delete this webhook?")) return;
        try { await api(`/webhooks/${hook.id}`, { method: "DELETE" }); route(); } catch (e) { say(e.message, true); }
      } }, "Delete webhook")));
  }
  main.replaceChildren(el("h2", {}, "Webhooks"),
    el("form", { onsubmit: async (e) => {
      e.preventDefault();
      try {
        const hook = (await api("/webhooks", { method: "POST", query: { url: url.value, name: name.value || undefined } })).data;
        secretBox.replaceChildren(el("p", {}, "Signing secret (shown once): ", el("code", {}, hook.signing_secret)));
        say("Webhook created.");
      } catch (err) { say(err.message, true); }
    } }, el("label", { for: "webhook-url" }, "URL"), url, el("label", { for: "webhook-name" }, "Name ", el("span", { class: "hint" }, "optional")), name,
    el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Create webhook"))),
    secretBox, ...rows);
}

// Connected accounts: listed without their values (the API never answers them), made and deleted.
async function accountsPage() {
  const accounts = (await api("/accounts", { query: { limit: 100 } })).data;
  const app = el("input", { type: "text", id: "account-app", placeholder: "slack", required: true });
  const name = el("input", { type: "text", id: "account-name" });
  const credentials = el("textarea", { id: "account-credentials", placeholder: '{"api_key": "…"}' });
  const pending = el("div", { "aria-live": "polite" });
  // OAuth (connect, or reconnect an account): the provider's authorize page opens in a new window,
  // and this page watches the list until the account appears or changes.
  const authorize = async (body) => {
    const started = (await api("/oauth/connect", { method: "POST", body })).data;
    window.open(started.authorize_url, "_blank", "noopener");
    pending.replaceChildren(el("p", {}, "Authorize in the window that opened (or ",
      el("a", { href: started.authorize_url, target: "_blank", rel: "noopener" }, "open the authorize page"),
      "); this page updates when the account is connected."));
    const seen = (list) => JSON.stringify(list.map((a) => [a.id, a.status, a.updated_at]));
    const before = seen(accounts);
    const timer = setInterval(async () => {
      try {
        if (seen((await api("/accounts", { query: { limit: 100 } })).data) !== before) { clearInterval(timer); route(); }
      } catch (e) { clearInterval(timer); }
      if (Date.now() / 1000 > started.expires_at) clearInterval(timer);
    }, 1500);
    leaving.push(() => clearInterval(timer));
  };
  main.replaceChildren(el("h2", {}, "Accounts"),
    el("p", { class: "hint" }, "Give an app prop {\"authProvisionId\": \"apn_…\"}: its sources use the account's current credentials."),
    accounts.length ? el("table", { id: "accounts" },
      el("thead", {}, el("tr", {}, ["Name", "App", "Status", "Fields", "Id", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, accounts.map((a) => el("tr", {},
        el("td", {}, a.name), el("td", {}, a.app), el("td", {}, el("span", { class: "badge" }, a.status)),
        el("td", {}, a.fields.join(", ")), el("td", {}, el("code", {}, a.id)),
        el("td", {}, a.kind === "oauth" ? el("button", { type: "button", "aria-label": `Reconnect ${a.name}`, onclick: async () => {
          try { await authorize({ account_id: a.id }); } catch (e) { say(e.message, true); }
        } }, "Reconnect") : "", " ", el("button", { class: "danger", "aria-label": `Delete ${a.name}`, onclick: async () => {
          if (!confirm(`Delete ${a.name}? Sources using it will fail until given another account.`)) return;
          try { await api(`/accounts/${a.id}`, { method: "DELETE" }); say("Account deleted."); route(); } catch (e) { say(e.message, true); }
        } }, "Delete")))))) : el("p", {}, "No accounts yet."),
    el("form", { onsubmit: async (e) => {
      e.preventDefault();
      let fields;
      try { fields = credentials.value.trim() ? JSON.parse(credentials.value) : {}; } catch { say("The credentials are not valid JSON.", true); return; }
      try {
        await api("/accounts", { method: "POST", body: { app: app.value, name: name.value || undefined, credentials: fields } });
        say("Account connected."); route();
      } catch (err) { say(err.message, true); }
    } }, el("h3", {}, "Connect an account (with keys, or with OAuth)"),
    el("label", { for: "account-app" }, "App"), app,
    el("label", { for: "account-name" }, "Name ", el("span", { class: "hint" }, "optional")), name,
    el("label", { for: "account-credentials" }, "Credentials ", el("span", { class: "hint" }, "JSON; never shown again")), credentials,
    el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Connect account"),
      el("button", { type: "button", id: "connect-oauth", onclick: async () => {
        if (!app.value.trim()) { say("Give the app to connect.", true); return; }
        try { await authorize({ app: app.value.trim(), name: name.value.trim() || undefined }); } catch (err) { say(err.message, true); }
      } }, "Connect with OAuth")),
    el("p", { class: "hint" }, "With OAuth, the credentials come from the app's provider: leave them empty.")),
    pending);
}

async function workflowsPage() {
  const workflows = (await api("/users/me/workflows")).data;
  main.replaceChildren(el("h2", {}, "Workflows"),
    el("p", { class: "hint" }, "Deploy them with `headwater workflows deploy FILE.yaml --user u_…`."),
    workflows.length ? el("ul", {}, workflows.map((w) => el("li", {}, el("a", { href: `#/workflows/${w.id}` }, w.name), ` — ${w.steps.length} steps, ${w.deployment_id}`)))
      : el("p", {}, "No workflows yet."));
}

async function workflowPage(id) {
  const detail = el("section", { id: "event-detail" }, el("p", { class: "hint" }, "Select an event to see its JSON."));
  const panes = await eventPanes("workflows", id, detail);
  main.replaceChildren(el("h2", {}, `Workflow ${id}`), el("div", { class: "panes" }, panes.map((p) => p.pane)), detail);
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
  leaving.forEach((stop) => stop());
  leaving = [];
  const hash = location.hash || "#/sources";
  if (!sessionStorage.getItem(KEY) || hash === "#/login") { loginPage(); return; }
  document.getElementById("nav").hidden = false;
  const [, page, id] = hash.slice(1).split("/");
  main.replaceChildren(el("p", {}, "Loading…"));
  try {
    if (page === "sources" && id) await sourcePage(id);
    else if (page === "deploy") await deployPage();
    else if (page === "webhooks") await webhooksPage();
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
window.addEventListener("hashchange", route);
route();
