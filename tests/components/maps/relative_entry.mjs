// Imports a neighbour; deployed through the source pass (like a workflow step or a registry file).
import { explode } from "./lib/explode.mjs"

export default {
  name: "Maps relative",
  version: "0.1.0",
  async run() {
    explode("relative")
  },
}
