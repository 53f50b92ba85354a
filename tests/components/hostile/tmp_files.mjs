// Threat 6: /tmp shared between accounts. `write` leaves a file; `probe` looks for it.
import fs from "node:fs";

export default {
  name: "Hostile tmp",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const path = `/tmp/${event.body.name}`;
    if (event.body.op === "write") {
      fs.writeFileSync(path, event.body.secret);
      this.$emit({ wrote: path, listing: fs.readdirSync("/tmp"), readBack: fs.readFileSync(path, "utf8") });
      return;
    }
    const probe = {};
    try {
      probe.read = fs.readFileSync(path, "utf8");
    } catch (e) {
      probe.read = e.code;
    }
    try {
      probe.listing = fs.readdirSync("/tmp");
    } catch (e) {
      probe.listing = e.code;
    }
    try {
      fs.writeFileSync(path, "mine", { flag: "wx" }); // fails with EEXIST when the file is there
      probe.exclusiveCreate = "created";
    } catch (e) {
      probe.exclusiveCreate = e.code;
    }
    this.$emit(probe);
  },
};
