import { randomUUID } from "node:crypto";

const ID_HEADERS = [
  "x-request-id",
  "webhook-id",
  "x-github-delivery",
  "idempotency-key",
  "x-amzn-trace-id",
];

export default {
  key: "headwater-http",
  name: "New Requests",
  description: "Get a URL and emit the full HTTP event (method, path, query, headers and body) for every request. Each request is answered `200 {\"success\": true}` at once.",
  version: "0.1.1",
  type: "source",
  props: {
    http: {
      type: "$.interface.http",
      customResponse: false,
    },
  },
  methods: {
    requestId(headers = {}) {
      for (const name of ID_HEADERS) {
        const value = headers[name];
        if (typeof value === "string" && value) {
          return value;
        }
      }
      return randomUUID();
    },
  },
  async run(event) {
    // A manual run (POST /sources/{id}/run) with no body has no request: emit an empty one.
    event = event ?? {};
    this.$emit(event, {
      id: this.requestId(event.headers),
      summary: event.method ? `${event.method} ${event.path}` : "manual run",
      ts: Date.now(),
    });
  },
};
