// A well-behaved run that is in flight as long as the test's loopback listener keeps it waiting.
export default {
  name: "Held run",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const response = await fetch(event.body.url);
    this.$emit({ n: event.body.n, answer: await response.text() });
  },
};
