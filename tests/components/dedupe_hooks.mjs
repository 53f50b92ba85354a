import { axios } from "@pipedream/platform";

export default {
  key: "test-stripe-new-event",
  name: "New Stripe Event (Instant)",
  description: "Emit every Stripe event of the selected types as it happens.",
  version: "0.1.5",
  type: "source",
  dedupe: "unique",
  props: {
    http: "$.interface.http",
    db: "$.service.db",
    apiKey: {
      type: "string",
      label: "Secret Key",
      description: "A Stripe secret key, e.g. `sk_live_...`",
      secret: true,
    },
    enabledEvents: {
      type: "string[]",
      label: "Events",
      description: "Event types to listen for, or `*` for all",
      optional: true,
      default: [
        "*",
      ],
    },
  },
  methods: {
    _request(opts) {
      return axios(this, {
        baseURL: "https://api.stripe.com/v1",
        auth: {
          username: this.apiKey,
          password: "",
        },
        ...opts,
      });
    },
    emitEvent(event) {
      this.$emit(event, {
        id: event.id,
        summary: `${event.type} ${event.data?.object?.id ?? ""}`.trim(),
        ts: event.created * 1000,
      });
    },
  },
  hooks: {
    async deploy() {
      const { data } = await this._request({
        url: "/events",
        params: {
          limit: 25,
        },
      });
      for (const event of data.reverse()) {
        this.emitEvent(event);
      }
    },
    async activate() {
      const endpoint = await this._request({
        method: "POST",
        url: "/webhook_endpoints",
        headers: {
          "Content-Type": "application/x-www-form-urlencoded",
        },
        data: new URLSearchParams([
          ["url", this.http.endpoint],
          ...(this.enabledEvents ?? ["*"]).map((e) => ["enabled_events[]", e]),
        ]).toString(),
      });
      this.db.set("endpointId", endpoint.id);
    },
    async deactivate() {
      const endpointId = this.db.get("endpointId");
      if (endpointId) {
        await this._request({
          method: "DELETE",
          url: `/webhook_endpoints/${endpointId}`,
        });
        this.db.set("endpointId", null);
      }
    },
  },
  async run(event) {
    if (event.body?.object !== "event") {
      console.log("Ignoring a request that is not a Stripe event");
      return;
    }
    this.emitEvent(event.body);
  },
};
