// Threat 1: a parent-escaping relative import of a host file.
import passwd from "../../../../../../../../etc/passwd" with { type: "text" };

export default {
  name: "Hostile import (parent)",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    this.$emit({ passwd });
  },
};
