// Threat 1 (at run time): read host files with `fs`; every path of the request body is tried.
import fs from "node:fs";

export default {
  name: "Hostile fs reads",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const seen = {};
    for (const path of event.body.paths) {
      try {
        seen[path] = { ok: true, value: fs.readFileSync(path, "utf8").slice(0, 64) };
      } catch (e) {
        seen[path] = { ok: false, code: e.code || e.name };
      }
    }
    this.$emit(seen);
  },
};
