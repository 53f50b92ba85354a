import { randomInt } from "node:crypto";
import { ConfigurationError } from "@pipedream/platform";

export default {
  key: "test-random-integers",
  name: "Generate Random Integers",
  description: "Generate cryptographically secure random integers in a range.",
  version: "0.1.0",
  type: "action",
  props: {
    count: {
      type: "integer",
      label: "Count",
      description: "How many numbers to generate",
      optional: true,
      default: 5,
      min: 1,
      max: 100,
    },
    lowest: {
      type: "integer",
      label: "Lowest",
      min: 0,
    },
    highest: {
      type: "integer",
      label: "Highest",
      max: 1000000,
    },
  },
  async run({ $ }) {
    if (this.lowest >= this.highest) {
      throw new ConfigurationError("Lowest must be smaller than Highest");
    }
    const numbers = Array.from({ length: this.count ?? 5 }, () => randomInt(this.lowest, this.highest + 1));
    $.export("$summary", `Generated ${numbers.length} numbers`);
    return numbers;
  },
};
