// Threat 1: the service's database read into the bundle through an import with type bytes.
import db from "__DATA_DIR__/headwater.db" with { type: "bytes" };

export default {
  name: "Hostile import (bytes)",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    this.$emit({ size: db.length });
  },
};
