export default {
  key: "test-http-custom-response",
  name: "HTTP Webhook with Custom Response",
  description: "Emit every request sent to the endpoint and answer it with a JSON acknowledgement.",
  version: "0.0.3",
  type: "source",
  props: {
    http: {
      type: "$.interface.http",
      customResponse: true,
    },
    db: "$.service.db",
  },
  async run(event) {
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);

    await this.http.respond({
      status: 200,
      headers: {
        "content-type": "application/json",
      },
      body: {
        received: true,
        count,
      },
    });

    this.$emit(event, {
      id: event.headers["x-request-id"] ?? `${Date.now()}-${count}`,
      summary: `${event.method} ${event.path}`,
      ts: Date.now(),
    });
  },
};
