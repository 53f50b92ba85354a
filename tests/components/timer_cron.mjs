export default {
  key: "test-cron-digest",
  name: "Weekday Morning Digest",
  description: "Emit a digest trigger at 09:00 every weekday.",
  version: "1.0.0",
  type: "source",
  props: {
    timer: {
      type: "$.interface.timer",
      label: "Schedule",
      default: {
        cron: "0 9 * * 1-5",
      },
    },
    recipients: {
      type: "string[]",
      label: "Recipients",
      description: "Email addresses that should receive the digest",
    },
  },
  async run(event) {
    const when = new Date(event.timestamp * 1000);
    this.$emit({
      scheduledFor: when.toISOString(),
      cron: event.cron,
      recipients: this.recipients,
    }, {
      id: String(event.timestamp),
      summary: `Digest for ${when.toISOString().slice(0, 10)}`,
      ts: when.getTime(),
    });
  },
};
