import { DEFAULT_POLLING_SOURCE_TIMER_INTERVAL } from "@pipedream/platform";
import github from "./app.mjs";

export default {
  props: {
    github,
    db: "$.service.db",
    timer: {
      type: "$.interface.timer",
      default: {
        intervalSeconds: DEFAULT_POLLING_SOURCE_TIMER_INTERVAL,
      },
    },
  },
  methods: {
    _getLastTs() {
      return this.db.get("lastTs");
    },
    _setLastTs(ts) {
      this.db.set("lastTs", ts);
    },
    getItems() {
      throw new Error("getItems is not implemented");
    },
    getTs() {
      throw new Error("getTs is not implemented");
    },
    generateMeta() {
      throw new Error("generateMeta is not implemented");
    },
  },
  async run() {
    const since = this._getLastTs();
    const items = await this.getItems(since);
    let lastTs = since;
    for (const item of items.reverse()) {
      const ts = this.getTs(item);
      if (!lastTs || ts > lastTs) {
        lastTs = ts;
      }
      this.$emit(item, this.generateMeta(item));
    }
    if (lastTs) {
      this._setLastTs(lastTs);
    }
  },
};
