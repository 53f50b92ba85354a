// Throws from its own code, two calls deep, and logs the error first: its stack must name this
// file's lines (tests/e2e/test_source_maps.py), not the bundle's.
function deeper(n) {
  if (n > 0) return deeper(n - 1)
  throw new Error("thrown at line 6")
}

export default {
  name: "Maps ESM",
  version: "0.1.0",
  async run() {
    try {
      deeper(1)
    } catch (err) {
      console.error(err)
      throw err
    }
  },
}
