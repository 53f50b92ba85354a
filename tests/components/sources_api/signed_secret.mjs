import crypto from "crypto";

// Secret prop: the component gets the plaintext, responses never show it.
export default {
  key: "sources-api-signed-secret",
  name: "Signed Deliveries",
  description: "Emit deliveries signed with a shared secret.",
  version: "0.1.0",
  type: "source",
  props: {
    db: "$.service.db",
    signingSecret: {
      type: "string",
      label: "Signing Secret",
      secret: true,
    },
    channel: {
      type: "string",
      label: "Channel",
      optional: true,
      default: "general",
    },
  },
  methods: {
    fingerprint() {
      return crypto.createHash("sha256").update(this.signingSecret).digest("hex");
    },
  },
  hooks: {
    async deploy() {
      this.db.set("fingerprintAtDeploy", this.fingerprint());
    },
    async activate() {
      this.$emit({
        hook: "activate",
        secretLength: this.signingSecret.length,
        fingerprint: this.fingerprint(),
      }, { summary: "activated" });
    },
  },
  async run(event) {
    const signature = crypto.createHmac("sha256", this.signingSecret).update(JSON.stringify(event)).digest("hex");
    this.$emit({
      signature,
      secretLength: this.signingSecret.length,
      fingerprintAtDeploy: this.db.get("fingerprintAtDeploy"),
      channel: this.channel,
    }, { summary: "signed" });
  },
};
