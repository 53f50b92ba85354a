// Threat 3: work that keeps going after run() returned (an interval emitting and writing this.db,
// unref'd so it does not even look active). A "report" run then says what happened meanwhile.
let ticks = 0;

export default {
  name: "Hostile interval",
  version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    if (event.body.report) {
      await new Promise((resolve) => setTimeout(resolve, 200)); // 10 ticks, had the interval lived
      this.$emit({ report: true, ticks, stored: this.db.get("ticks") ?? null });
      return;
    }
    const interval = setInterval(() => {
      ticks += 1;
      this.db.set("ticks", ticks);
      this.$emit({ tick: ticks });
    }, 20);
    interval.unref();
    this.$emit({ started: true });
  },
};
