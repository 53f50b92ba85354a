// AWS Lambda entry point: the event is the request (docs/runner-protocol.md). Partial `respond`
// lines have no channel back on Lambda, so they are collected into `partials` of the response.
//
// Component code never runs in this process: this process's environment holds the Lambda role's
// credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and the runtime API's
// address. It runs in a child process (stdio.mjs, the local runner's driver) started with an
// empty environment and Node's permission model (no child processes, no addons, file reads only
// of the runner code and /tmp), kept warm across invocations and started again if it dies
// (docs/security.md, "AWS").
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const RUNNER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const TMP = '/tmp'

let child = null
let nextId = 1
const pending = new Map() // id -> {resolve, partials}

function start() {
  const args = [
    '--permission', '--allow-worker', `--allow-fs-read=${RUNNER_DIR}`, `--allow-fs-read=${TMP}`,
    `--allow-fs-write=${TMP}`, '--disable-warning=SecurityWarning', path.join(RUNNER_DIR, 'src', 'stdio.mjs'),
  ]
  const proc = spawn(process.execPath, args, { env: {}, cwd: TMP, stdio: ['pipe', 'pipe', 'inherit'] })
  createInterface({ input: proc.stdout, crlfDelay: Infinity }).on('line', (line) => {
    let message
    try {
      message = JSON.parse(line)
    } catch {
      return
    }
    const call = pending.get(message.id)
    if (!call) return
    if (message.partial) call.partials.push(message)
    else {
      pending.delete(message.id)
      call.resolve(message)
    }
  })
  proc.on('exit', (code, signal) => {
    if (child === proc) child = null
    for (const [id, call] of pending) {
      pending.delete(id)
      call.resolve({ id, ok: false, error: { code: 'RUNNER_CRASHED', message: `runner process exited with ${signal || code}` } })
    }
  })
  proc.stdin.on('error', () => {}) // a dead child: its exit answers the calls
  return proc
}

export const handler = async (event) => {
  if (!child) child = start()
  const id = nextId++
  const partials = []
  const res = await new Promise((resolve) => {
    pending.set(id, { resolve, partials })
    child.stdin.write(JSON.stringify({ ...event, id }) + '\n')
  })
  const callerId = event && typeof event === 'object' && !Array.isArray(event) ? event.id ?? null : null
  for (const p of partials) p.id = callerId
  const out = { ...res, id: callerId }
  if (partials.length) out.partials = partials
  return out
}
