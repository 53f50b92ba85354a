export default {
  key: "headwater-schedule",
  name: "Schedule",
  description: "Emit an event on a schedule: every N seconds, or on a cron expression.",
  version: "0.1.0",
  type: "source",
  props: {
    timer: {
      type: "$.interface.timer",
      label: "Schedule",
      description: "How often to emit an event",
      default: {
        intervalSeconds: 60,
      },
    },
  },
  async run(event = {}) {
    const timestamp = event.timestamp ?? Math.floor(Date.now() / 1000);
    const emitted = {
      timestamp,
      interval_seconds: event.interval_seconds ?? this.timer?.intervalSeconds ?? null,
    };
    if (event.cron) {
      emitted.cron = event.cron;
    }
    const when = new Date(timestamp * 1000).toISOString();
    this.$emit(emitted, {
      id: String(timestamp),
      summary: `Scheduled run at ${when}`,
      ts: timestamp * 1000,
    });
  },
};
