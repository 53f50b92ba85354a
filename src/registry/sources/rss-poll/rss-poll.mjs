import { createHash } from "node:crypto";
import {
  axios,
  ConfigurationError,
  DEFAULT_POLLING_SOURCE_TIMER_INTERVAL,
} from "@pipedream/platform";

const LIST_KEYS = [
  "items",
  "data",
  "results",
  "entries",
  "records",
];

export default {
  key: "headwater-poll-json",
  name: "New Items in JSON Feed",
  description: "Poll a URL that answers with JSON (an array of items, or an object holding one) and emit each item not seen before.",
  version: "0.1.0",
  type: "source",
  dedupe: "unique",
  props: {
    db: "$.service.db",
    timer: {
      type: "$.interface.timer",
      default: {
        intervalSeconds: DEFAULT_POLLING_SOURCE_TIMER_INTERVAL,
      },
    },
    url: {
      type: "string",
      label: "URL",
      description: "The address to fetch; it must answer with JSON",
    },
    idField: {
      type: "string",
      label: "ID Field",
      description: "The field that identifies each item; a dot path such as `data.id` reaches into nested objects",
      optional: true,
      default: "id",
    },
    itemsPath: {
      type: "string",
      label: "Items Path",
      description: "Where the list of items is in the response, as a dot path (e.g. `data.children`). Leave empty when the response is the list itself, or an object with an `items`, `data`, `results`, `entries` or `records` list.",
      optional: true,
    },
  },
  methods: {
    _getLastFetchTs() {
      return this.db.get("lastFetchTs");
    },
    _setLastFetchTs(ts) {
      this.db.set("lastFetchTs", ts);
    },
    dig(value, path) {
      return String(path)
        .split(".")
        .filter(Boolean)
        .reduce((current, key) => (current == null ? undefined : current[key]), value);
    },
    extractItems(data) {
      if (this.itemsPath) {
        const items = this.dig(data, this.itemsPath);
        if (!Array.isArray(items)) {
          throw new ConfigurationError(`The response has no list at "${this.itemsPath}"`);
        }
        return items;
      }
      if (Array.isArray(data)) {
        return data;
      }
      if (data && typeof data === "object") {
        for (const key of LIST_KEYS) {
          if (Array.isArray(data[key])) {
            return data[key];
          }
        }
        return [data];
      }
      throw new ConfigurationError(`${this.url} did not answer with JSON`);
    },
    itemId(item) {
      const id = this.dig(item, this.idField || "id");
      if (id !== undefined && id !== null && typeof id !== "object") {
        return String(id);
      }
      return createHash("sha256").update(JSON.stringify(item)).digest("hex");
    },
    itemSummary(item, id) {
      const title = item?.title ?? item?.name ?? item?.subject;
      return typeof title === "string" && title ? title.slice(0, 200) : `Item ${id}`;
    },
  },
  async run() {
    const previous = this._getLastFetchTs();
    const fetchedAt = Date.now();
    const data = await axios(this, {
      url: this.url,
      headers: {
        Accept: "application/json",
      },
    });
    const items = this.extractItems(data);
    console.log(`Fetched ${items.length} item(s) from ${this.url}; previous fetch: ${previous ? new Date(previous).toISOString() : "never"}`);
    for (const item of items) {
      const id = this.itemId(item);
      this.$emit(item, {
        id,
        summary: this.itemSummary(item, id),
        ts: fetchedAt,
      });
    }
    this._setLastFetchTs(fetchedAt);
  },
};
