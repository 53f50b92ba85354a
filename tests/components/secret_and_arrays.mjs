import crypto from "crypto";

export default {
  key: "test-signed-webhook",
  name: "New Signed Webhook Delivery",
  description: "Emit webhook deliveries whose HMAC-SHA256 signature matches the shared secret.",
  version: "0.2.3",
  type: "source",
  props: {
    http: "$.interface.http",
    signingSecret: {
      type: "string",
      label: "Signing Secret",
      description: "The secret shared with the sender",
      secret: true,
    },
    signatureHeader: {
      type: "string",
      label: "Signature Header",
      optional: true,
      default: "x-hub-signature-256",
    },
    events: {
      type: "string[]",
      label: "Events",
      description: "Only emit deliveries of these event types",
      optional: true,
      default: [
        "push",
        "release",
      ],
    },
  },
  methods: {
    isValid(bodyRaw, signature) {
      const expected = `sha256=${crypto.createHmac("sha256", this.signingSecret).update(bodyRaw).digest("hex")}`;
      return typeof signature === "string"
        && signature.length === expected.length
        && crypto.timingSafeEqual(Buffer.from(signature), Buffer.from(expected));
    },
  },
  async run(event) {
    const signature = event.headers[this.signatureHeader ?? "x-hub-signature-256"];
    if (!this.isValid(event.bodyRaw ?? "", signature)) {
      console.warn("Signature mismatch, delivery ignored");
      return;
    }
    const type = event.headers["x-github-event"];
    if (this.events?.length && !this.events.includes(type)) {
      return;
    }
    this.$emit(event.body, {
      id: event.headers["x-github-delivery"],
      summary: `${type} delivery`,
      ts: Date.now(),
    });
  },
};
