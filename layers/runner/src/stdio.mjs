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
// The service is this process's only reader: once a pipe to it breaks (it died), nothing this
// process does can reach anyone, so it stops at once instead of reporting errors nobody reads.
process.stdout.on('error', () => process.exit(0))
process.stderr.on('error', () => process.exit(0))
function report(what, e) {
  try {
    process.stderr.write(`runner: ${what} ${e && e.stack ? e.stack : e}\n`)
  } catch {
    process.exit(0)
  }
}
process.on('uncaughtException', (e) => {
  if (e && e.code === 'EPIPE') process.exit(0)
  report('uncaught', e)
})
process.on('unhandledRejection', (e) => report('unhandled rejection', e))

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
  handle(req, (partial) => write(partial))
    .then(write, (e) => write({ id: req && req.id !== undefined ? req.id : null, ok: false, error: { code: 'RUNTIME_ERROR', message: String(e && e.message) } }))
})
// stdin closes when the service stops or dies: answers could no longer be delivered, so
// in-flight runs are abandoned (their tasks stay queued in the service and run again).
rl.on('close', async () => {
  await shutdown()
  process.exit(0)
})
