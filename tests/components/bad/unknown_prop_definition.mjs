const airtable = {
  type: "app",
  app: "airtable",
  propDefinitions: {
    baseId: {
      type: "string",
      label: "Base",
    },
  },
};

export default {
  key: "bad-airtable-create-record",
  name: "Create Record",
  version: "0.0.1",
  type: "action",
  props: {
    airtable,
    baseId: {
      propDefinition: [
        airtable,
        "baseId",
      ],
    },
    tableId: {
      propDefinition: [
        airtable,
        "tableId",
      ],
    },
  },
  async run({ $ }) {
    $.export("$summary", `Record created in ${this.tableId}`);
  },
};
