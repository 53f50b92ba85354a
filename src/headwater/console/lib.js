// What every page of the console uses: building nodes, the API, live streams, times, notes.
// Every value from the API reaches the page as text nodes (never as HTML), so event data
// cannot inject markup. The API key lives in sessionStorage: gone when the tab closes.

export const KEY = "headwater.apiKey";
export const main = document.getElementById("main");
const statusBox = document.getElementById("status");
let leaving = [];  // cleanups of the current page (open event streams)

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function say(message, isError = false) {
  const note = el("div", { class: isError ? "error" : "" }, message);
  statusBox.append(note);
  setTimeout(() => note.remove(), isError ? 8000 : 4000);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
  location.hash = "#/login";
}

/** Draws the current page again (after a change made on it). */
export function refresh() {
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

/** The page's content: the nodes given, those null or false left out. */
export function render(...nodes) {
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

export function onLeave(stop) { leaving.push(stop); }

export function leave() {
  leaving.forEach((stop) => stop());
  leaving = [];
}

export async function api(path, { method = "GET", body, query } = {}) {
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

/** Every item of a paginated listing, page after page. */
export async function all(path, query = {}, pageSize = 100) {
  const items = [];
  let after;
  for (;;) {
    const page = await api(path, { query: { ...query, limit: pageSize, after } });
    items.push(...page.data);
    if (page.data.length < pageSize || !page.page_info || !page.page_info.end_cursor) return items;
    after = page.page_info.end_cursor;
  }
}

// Server-sent events over fetch (EventSource cannot send the Authorization header); reconnects
// with Last-Event-ID, so nothing retained is missed across a dropped connection. `after`: the
// newest event already shown (its first request asks for newer ones only).
export function follow(path, channel, onItem, after = "0-0") {
  const controller = new AbortController();
  let last = after;  // the newest id already shown: only newer ones are sent
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
  onLeave(() => { stopped = true; controller.abort(); });
  return { setLast: (id) => { last = id; } };
}

/** A Unix time in seconds, as the reader's clock shows it. */
export function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "";
}

/** A time in milliseconds, short: today's as a time of day, others with their date. */
export function whenMs(ms) {
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

export function compareIds(a, b) {
  const [am, as] = a.split("-").map(Number);
  const [bm, bs] = b.split("-").map(Number);
  return am - bm || as - bs;
}
