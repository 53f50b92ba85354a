export default {
  key: "test-format-date",
  name: "Format Date",
  description: "Convert a date to another format and time zone.",
  version: "0.0.4",
  type: "action",
  props: {
    date: {
      type: "string",
      label: "Date",
      description: "A date in ISO 8601 form, e.g. `2024-03-01T12:00:00Z`",
    },
    format: {
      type: "string",
      label: "Output Format",
      options: [
        "iso",
        "unix",
        "utc",
        "locale",
      ],
      optional: true,
      default: "iso",
    },
    timeZone: {
      type: "string",
      label: "Time Zone",
      options: [
        {
          label: "UTC",
          value: "UTC",
        },
        {
          label: "New York",
          value: "America/New_York",
        },
        {
          label: "Berlin",
          value: "Europe/Berlin",
        },
      ],
      optional: true,
      default: "UTC",
    },
  },
  async run({ $ }) {
    const date = new Date(this.date);
    if (Number.isNaN(date.getTime())) {
      throw new Error(`"${this.date}" is not a valid date`);
    }
    const timeZone = this.timeZone ?? "UTC";
    const formatters = {
      iso: () => date.toISOString(),
      unix: () => Math.floor(date.getTime() / 1000),
      utc: () => date.toUTCString(),
      locale: () => date.toLocaleString("en-US", { timeZone }),
    };
    const result = formatters[this.format ?? "iso"]();
    $.export("$summary", `Formatted date as ${this.format ?? "iso"}`);
    return result;
  },
};
