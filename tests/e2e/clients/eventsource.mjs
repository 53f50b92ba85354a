// A standard EventSource client (the WHATWG one of the npm `eventsource` package) following a
// Headwater SSE stream: prints one JSON line per message, reconnects on its own with
// Last-Event-ID when the connection drops. Usage: node eventsource.mjs URL API_KEY MODULE_DIR
// (MODULE_DIR: the installed package, web/node_modules/eventsource, pinned in web/package-lock.json)
import { pathToFileURL } from "node:url";

const [url, key, moduleDir] = process.argv.slice(2);
const { EventSource } = await import(pathToFileURL(`${moduleDir}/dist/index.js`).href);
const source = new EventSource(url, {
  fetch: (input, init) => {
    const headers = new Headers(init.headers); // keeps the client's own Last-Event-ID and Accept
    headers.set("Authorization", `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  },
});
const print = (message) => process.stdout.write(JSON.stringify({ id: message.lastEventId, type: message.type, data: JSON.parse(message.data) }) + "\n");
source.addEventListener("emit", print);
source.onopen = () => process.stderr.write("open\n");
source.onerror = (e) => process.stderr.write(`error ${source.readyState} ${e.message ?? ""} ${e.code ?? ""}\n`);
// The client's reconnect timer does not keep Node alive by itself; a follower should.
setInterval(() => {}, 1 << 30);
