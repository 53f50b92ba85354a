import { ConfigurationError } from "@pipedream/platform";

export default {
  key: "headwater-pick-fields",
  name: "Pick Fields",
  description: "Return a new object holding only the listed fields of the input. Dot paths such as `user.email` reach into nested objects and keep their nesting in the result.",
  version: "0.1.0",
  type: "action",
  props: {
    object: {
      type: "object",
      label: "Object",
      description: "The object to pick fields from",
    },
    fields: {
      type: "string[]",
      label: "Fields",
      description: "Names or dot paths of the fields to keep",
    },
    skipMissing: {
      type: "boolean",
      label: "Skip Missing Fields",
      description: "Leave out fields the input does not have; when false they are set to `null`",
      optional: true,
      default: true,
    },
  },
  methods: {
    toObject(value) {
      if (typeof value === "string") {
        try {
          value = JSON.parse(value);
        } catch {
          throw new ConfigurationError("Object must be a JSON object");
        }
      }
      if (!value || typeof value !== "object" || Array.isArray(value)) {
        throw new ConfigurationError("Object must be a JSON object");
      }
      return value;
    },
    toFields(value) {
      const fields = typeof value === "string"
        ? value.split(",")
        : value ?? [];
      return fields.map((field) => String(field).trim()).filter(Boolean);
    },
    lookup(source, path) {
      let current = source;
      for (const key of path) {
        if (current === null || typeof current !== "object" || !Object.prototype.hasOwnProperty.call(current, key)) {
          return { found: false };
        }
        current = current[key];
      }
      return { found: true, value: current };
    },
    assign(target, path, value) {
      let current = target;
      path.slice(0, -1).forEach((key) => {
        if (current[key] === null || typeof current[key] !== "object") {
          current[key] = {};
        }
        current = current[key];
      });
      current[path[path.length - 1]] = value;
    },
  },
  async run({ $ }) {
    const source = this.toObject(this.object);
    const fields = this.toFields(this.fields);
    const skipMissing = this.skipMissing ?? true;
    const result = {};
    let picked = 0;
    for (const field of fields) {
      const path = field.split(".");
      const { found, value } = this.lookup(source, path);
      if (found) {
        this.assign(result, path, value);
        picked += 1;
      } else if (!skipMissing) {
        this.assign(result, path, null);
      }
    }
    $.export("$summary", `Picked ${picked} of ${fields.length} field${fields.length === 1 ? "" : "s"}`);
    return result;
  },
};
