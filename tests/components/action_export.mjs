export default {
  key: "test-parse-json",
  name: "Parse JSON",
  description: "Parse a JSON string and export its top-level keys.",
  version: "0.0.2",
  type: "action",
  props: {
    text: {
      type: "string",
      label: "JSON Text",
      description: "The JSON document to parse",
    },
  },
  async run({ $ }) {
    let parsed;
    try {
      parsed = JSON.parse(this.text);
    } catch (err) {
      throw new Error(`Invalid JSON: ${err.message}`);
    }
    const keys = parsed && typeof parsed === "object" && !Array.isArray(parsed)
      ? Object.keys(parsed)
      : [];
    $.export("keys", keys);
    $.export("$summary", `Parsed JSON with ${keys.length} top-level key${keys.length === 1 ? "" : "s"}`);
    return parsed;
  },
};
