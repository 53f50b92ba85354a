// Threat: describe shares a process (and its /tmp) between accounts. Module code runs while a
// component is described; it leaves a mark in /tmp and reports the marks of others it can see.
import fs from "node:fs";

fs.writeFileSync("/tmp/mark-__MARK__", "here");
const seen = fs.readdirSync("/tmp").filter((name) => name.startsWith("mark-")).sort();

export default {
  name: "Scratch reader",
  version: seen.join(",") || "none", // a version is any string: it carries what was seen back
  props: { http: "$.interface.http" },
  run() {},
};
