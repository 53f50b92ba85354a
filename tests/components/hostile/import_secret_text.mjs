// Threat 1: the service's secret key read into the bundle through an import with type text.
import key from "__DATA_DIR__/secret.key" with { type: "text" };

export default {
  name: "Hostile import (text)",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    this.$emit({ key });
  },
};
