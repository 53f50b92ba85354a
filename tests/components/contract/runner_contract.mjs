// The Runner contract's component (tests/contract/test_runner_contract.py): each run counts in
// this.db, answers its request and emits; `fail` throws after a write and an emit, `hang` spins
// for ever after them, `stall` waits for ever (idle), `crash` kills the runner process after
// that many ms. Hooks write and emit; `colour` has paged options and reloads the props.
export default {
  key: "test-runner-contract",
  name: "Runner Contract",
  description: "What every runner adapter must do alike.",
  version: "1.2.3",
  type: "source",
  props: {
    http: { type: "$.interface.http", customResponse: true },
    db: "$.service.db",
    greeting: { type: "string", label: "Greeting", optional: true, default: "hello" },
    colour: {
      type: "string",
      label: "Colour",
      reloadProps: true,
      async options({ page, prevContext, query }) {
        const pages = [["red", "green"], ["blue"]];
        const options = (pages[page] ?? []).filter((o) => !query || o.includes(query));
        return { options, context: page + 1 < pages.length ? { after: (prevContext?.after ?? 0) + options.length } : null };
      },
    },
  },
  async additionalProps() {
    // a prop left undefined, as registry components leave one they add only in some cases
    return this.colour ? { shade: { type: "string", label: `Shade of ${this.colour}` }, tint: undefined } : {};
  },
  hooks: {
    async deploy() {
      this.db.set("deployed", this.greeting);
      this.$emit({ hook: "deploy" }, { id: "deploy" });
    },
    async activate() {
      this.db.set("active", true);
    },
    async deactivate() {
      this.db.set("active", false);
    },
  },
  async run(event) {
    const seen = this.db.get("last") ?? null;
    this.db.set("last", event.n);
    if (event.crash) {
      await new Promise((resolve) => setTimeout(resolve, event.crash)); // the runs before it reported
      try {
        process.abort(); // refused in a worker thread
      } catch {
        process.kill(process.pid, "SIGKILL");
      }
    }
    if (event.stall) await new Promise(() => {}); // never ends, using no CPU
    if (event.fail || event.hang) {
      this.$emit({ n: event.n, before: event.fail ? "fail" : "hang" });
      if (event.hang) while (true) {}
      throw new Error(`no ${event.n}`);
    }
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    this.http.respond({ status: 201, headers: { "x-n": String(event.n) }, body: { n: event.n, count, greeting: this.greeting } });
    this.$emit({ n: event.n, count, seen }, { id: `e${event.n}`, summary: `event ${event.n}` });
  },
};
