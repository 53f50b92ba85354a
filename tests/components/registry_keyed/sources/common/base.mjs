import hwtest_docstore from "../../hwtest_docstore.app.mjs";
import { DEFAULT_POLLING_SOURCE_TIMER_INTERVAL } from "@pipedream/platform";

export default {
  props: {
    hwtest_docstore,
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
      return this.db.get("lastTs") || 0;
    },
    _setLastTs(lastTs) {
      this.db.set("lastTs", lastTs);
    },
    generateMeta() {
      throw new Error("generateMeta is not implemented");
    },
  },
  async run() {
    const lastTs = this._getLastTs();
    let maxTs = lastTs;
    const params = {
      page: 1,
    };
    let total;
    do {
      const { documents } = await this.hwtest_docstore.listDocuments({
        params,
      });
      for (const doc of documents) {
        const ts = Date.parse(doc.createdAt);
        if (ts > lastTs) {
          this.$emit(doc, this.generateMeta(doc));
          maxTs = Math.max(ts, maxTs);
        }
      }
      total = documents?.length;
      params.page++;
    } while (total > 0);
    this._setLastTs(maxTs);
  },
};
