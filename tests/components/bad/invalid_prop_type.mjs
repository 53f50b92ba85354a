export default {
  key: "bad-create-invoice",
  name: "Create Invoice",
  version: "0.0.1",
  type: "action",
  props: {
    customer: {
      type: "string",
      label: "Customer ID",
    },
    amount: {
      type: "number",
      label: "Amount",
      description: "Amount in cents",
    },
  },
  async run({ $ }) {
    $.export("$summary", `Invoice for ${this.customer}: ${this.amount}`);
    return { customer: this.customer, amount: this.amount };
  },
};
