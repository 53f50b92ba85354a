import get from "lodash@4.17.21/get";
import { v4 as uuidv4 } from "uuid@9.0.1";

export default {
  key: "test-npm-extract-field",
  name: "Extract Nested Field",
  description: "Read a value out of an object by its path, using [lodash.get](https://lodash.com/docs/#get).",
  version: "0.2.0",
  type: "action",
  props: {
    payload: {
      type: "object",
      label: "Payload",
    },
    path: {
      type: "string",
      label: "Path",
      description: "Dot path of the value, e.g. `user.address.city` or `items[0].sku`",
    },
    fallback: {
      type: "string",
      label: "Fallback",
      optional: true,
      default: "unknown",
    },
  },
  async run({ $ }) {
    const value = get(this.payload, this.path, this.fallback);
    const extractionId = uuidv4();
    $.export("$summary", `Extracted \`${this.path}\``);
    $.export("extraction_id", extractionId);
    return value;
  },
};
