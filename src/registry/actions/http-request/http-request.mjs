import { axios, ConfigurationError } from "@pipedream/platform";

export default {
  key: "headwater-http-request",
  name: "Send HTTP Request",
  description: "Send an HTTP request and return the response status, headers and body. A response outside 2xx fails the step.",
  version: "0.1.0",
  type: "action",
  props: {
    method: {
      type: "string",
      label: "Method",
      options: [
        "GET",
        "POST",
        "PUT",
        "PATCH",
        "DELETE",
        "HEAD",
        "OPTIONS",
      ],
      optional: true,
      default: "GET",
    },
    url: {
      type: "string",
      label: "URL",
      description: "An `http://` or `https://` address",
    },
    headers: {
      type: "object",
      label: "Headers",
      optional: true,
    },
    params: {
      type: "object",
      label: "Query Parameters",
      optional: true,
    },
    data: {
      type: "any",
      label: "Body",
      description: "Request body; objects are sent as JSON",
      optional: true,
    },
  },
  methods: {
    parseUrl(value) {
      let url;
      try {
        url = new URL(value);
      } catch {
        throw new ConfigurationError(`"${value}" is not a valid URL`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new ConfigurationError(`URL must start with http:// or https://, got "${url.protocol}"`);
      }
      return url;
    },
    parseObject(value, label) {
      if (value === undefined || value === null || value === "") {
        return undefined;
      }
      if (typeof value === "string") {
        try {
          return JSON.parse(value);
        } catch {
          throw new ConfigurationError(`${label} must be a JSON object`);
        }
      }
      return value;
    },
  },
  async run({ $ }) {
    const url = this.parseUrl(this.url);
    const method = (this.method || "GET").toUpperCase();
    const response = await axios($, {
      method,
      url: url.toString(),
      headers: this.parseObject(this.headers, "Headers"),
      params: this.parseObject(this.params, "Query Parameters"),
      data: this.data,
      returnFullResponse: true,
    });
    $.export("$summary", `${method} ${url.host}${url.pathname} answered ${response.status}`);
    return {
      status: response.status,
      headers: { ...response.headers },
      data: response.data,
    };
  },
};
