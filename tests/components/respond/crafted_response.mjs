// Answers each request with the crafted response its `?case=` names: responses no HTTP server may
// send as they are (tests/e2e/test_bad_input.py). The service must answer 502 or send a safe form.
const CASES = {
  "unicode-header": { status: 200, headers: { "x-greeting": "é✓" }, body: "ok" },
  "latin1-header": { status: 200, headers: { "x-greeting": "café" }, body: "ok" },
  "crlf-name": { status: 200, headers: { "x-a\r\nx-injected": "1" }, body: "ok" },
  "space-name": { status: 200, headers: { "x a": "1" }, body: "ok" },
  "crlf-value": { status: 200, headers: { "x-a": "1\r\nx-injected: 2" }, body: "ok" },
  "nul-value": { status: 200, headers: { "x-a": "1\u0000" }, body: "ok" },
  "status-100": { status: 100, body: "ok" },
  "status-101": { status: 101, headers: { upgrade: "websocket", connection: "upgrade" }, body: "ok" },
  "status-204-body": { status: 204, body: "not sent" },
  "framing-headers": { status: 200, headers: { "content-length": "999", "transfer-encoding": "chunked" }, body: "ok" },
  "cookies": { status: 200, headers: { "set-cookie": ["a=1", "b=2"] }, body: "ok" },
  "surrogate-body": { status: 200, body: "x\ud800y" },
};

export default {
  key: "test-crafted-response",
  name: "Crafted responses",
  version: "0.0.1",
  type: "source",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    await this.http.respond(CASES[event.query.case] ?? { status: 400, body: "unknown case" });
  },
};
