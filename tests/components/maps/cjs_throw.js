// CommonJS: the error is made on line 5.
const helpers = {
  fail(what) {
    const message = `failed ${what}`
    throw new TypeError(message)
  },
}

module.exports = {
  name: "Maps CJS",
  version: "0.1.0",
  async run() {
    helpers.fail("in cjs")
  },
}
