// JSON-lines driver for handle(): one request per stdin line, one response (and any partials)
// per stdout line. Requests run concurrently; responses carry the request id. Nothing else is
// ever written to stdout: user output is captured inside the workers.
import { createInterface } from 'node:readline'
import util from 'node:util'
import { handle, shutdown } from './handle.mjs'

const out = process.stdout
function write(obj) {
  const line = JSON.stringify(obj).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'))
  out.write(line + '\n')
}

// Keep stdout for protocol lines only.
for (const m of ['log', 'info', 'debug', 'warn', 'error', 'trace', 'dir', 'table']) {
  console[m] = (...args) => process.stderr.write(util.format(...args) + '\n')
}
process.on('uncaughtException', (e) => process.stderr.write(`runner: uncaught ${e && e.stack ? e.stack : e}\n`))
process.on('unhandledRejection', (e) => process.stderr.write(`runner: unhandled rejection ${e && e.stack ? e.stack : e}\n`))

let inflight = 0
let closing = false
async function finish() {
  if (!closing || inflight > 0) return
  await shutdown()
  process.exit(0)
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity })
rl.on('line', (line) => {
  if (!line.trim()) return
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    write({ id: null, ok: false, error: { code: 'BAD_REQUEST', message: `invalid JSON: ${e.message}` } })
    return
  }
  inflight++
  handle(req, (partial) => write(partial))
    .then(write, (e) => write({ id: req && req.id !== undefined ? req.id : null, ok: false, error: { code: 'RUNTIME_ERROR', message: String(e && e.message) } }))
    .finally(() => {
      inflight--
      finish()
    })
})
rl.on('close', () => {
  closing = true
  finish()
})
