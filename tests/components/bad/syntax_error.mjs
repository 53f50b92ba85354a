export default {
  name: "Broken Syntax",
  version: "0.0.1",
  props: {
    url: { type: "string", label: "URL" },
  },
  async run(event) {
    const body = { url: this.url, received: event.body ;
    this.$emit(body);
  },
};
