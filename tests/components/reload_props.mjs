import { ConfigurationError } from "@pipedream/platform";

export default {
  key: "test-create-crm-record",
  name: "Create CRM Record",
  description: "Create a contact or a company. The fields shown depend on the record type.",
  version: "0.1.0",
  type: "action",
  props: {
    info: {
      type: "alert",
      alertType: "info",
      content: "Pick a record type to see its fields.",
    },
    recordType: {
      type: "string",
      label: "Record Type",
      options: [
        "contact",
        "company",
      ],
      reloadProps: true,
    },
  },
  async additionalProps() {
    if (this.recordType === "contact") {
      return {
        email: {
          type: "string",
          label: "Email",
        },
        firstName: {
          type: "string",
          label: "First Name",
          optional: true,
        },
      };
    }
    if (this.recordType === "company") {
      return {
        domain: {
          type: "string",
          label: "Domain",
          description: "The company's website domain, e.g. `example.com`",
        },
      };
    }
    if (this.recordType) {
      throw new ConfigurationError(`Unknown record type "${this.recordType}"`);
    }
    return {};
  },
  async run({ $ }) {
    const record = this.recordType === "company"
      ? {
        type: "company",
        domain: this.domain,
      }
      : {
        type: "contact",
        email: this.email,
        firstName: this.firstName,
      };
    $.export("$summary", `Prepared ${record.type} record`);
    return record;
  },
};
