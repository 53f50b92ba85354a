export default {
  name: "Add",
  key: "test-add",
  version: "0.0.1",
  type: "action",
  props: { a: { type: "integer" }, b: { type: "integer" } },
  async run({ $ }) {
    console.log(`adding ${this.a} and ${this.b}`);
    $.export("$summary", `added ${this.a} and ${this.b}`);
    return this.a + this.b;
  },
};
