import common from "../common/base.mjs";

export default {
  ...common,
  key: "hwtest_docstore-new-document",
  name: "New Document",
  description: "Emit new event when a document is created.",
  version: "0.0.1",
  type: "source",
  dedupe: "unique",
  methods: {
    ...common.methods,
    generateMeta(doc) {
      return {
        id: doc.id,
        summary: `New Document: ${doc.id}`,
        ts: Date.parse(doc.createdAt),
      };
    },
  },
};
