// The workers (docs/runner-protocol.md, "ping"): one worker thread per component instance (and one
// per bundle for describe, additional_props and options), kept warm in an LRU and ended when idle
// too long or over a bound. A slot routes its worker's messages to the call in progress (calls.mjs)
// and ends that call when the worker dies: out of memory (V8's resourceLimits), an exit, a crash.
import { Worker } from 'node:worker_threads'
import { RunnerError } from './errors.mjs'
import { IDLE_MS, MAX_META_WORKERS, MAX_WORKERS, META_IDLE_MS } from './limits.mjs'
import { collect, collectStream } from './results.mjs'
import { cleanStack } from './stacks.mjs'

const WORKER_FILE = new URL('./worker.mjs', import.meta.url)
const EGRESS_DIR = process.env.HEADWATER_EGRESS_DIR || null // the runner's egress directory (egress.mjs)
export const META = 'describe:' // key prefix of describe, additional_props and options workers

const slots = new Map() // key -> Slot (Map order = LRU order)
let metaSlots = 0

class Slot {
  constructor(key, hash, code, env, envKey, memoryMb, file = null) {
    this.key = key
    this.hash = hash
    this.file = file
    this.envKey = envKey
    this.memoryMb = memoryMb
    this.dead = false
    this.current = null // the call in progress (calls.mjs)
    this.pending = 0
    this.lastUsed = Date.now()
    this.worker = new Worker(WORKER_FILE, {
      workerData: { code, hash, file, egress: EGRESS_DIR },
      env,
      execArgv: [...process.execArgv.filter((a) => a !== '--no-warnings'), '--no-warnings'],
      stdout: true,
      stderr: true,
      resourceLimits: { maxOldGenerationSizeMb: memoryMb },
    })
    const w = this.worker
    w.on('message', (m) => this.onMessage(m))
    w.on('error', (e) => this.onDeath(e && e.code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'OUT_OF_MEMORY' : 'RUNTIME_ERROR', e))
    w.on('exit', (code) => this.onDeath('RUNTIME_ERROR', new Error(`the component's worker exited (code ${code})`)))
    w.stdout.setEncoding('utf8').on('data', (s) => this.onStream('log', s))
    w.stderr.setEncoding('utf8').on('data', (s) => this.onStream('error', s))
  }

  onStream(level, s) {
    const call = this.current
    if (call) collectStream(call, level, s)
  }

  onMessage(m) {
    const call = this.current
    if (!call || (m.c !== null && m.c !== call.callId)) return
    // Only the call's own id ends it (output while the bundle loads has none). Component code can
    // post here too, so this is not the bound: the service keeps its own clock (node_runner.py).
    if ((m.t === 'done' || m.t === 'fail') && m.c !== call.callId) return
    if (m.t === 'done' || m.t === 'fail') call.settle(m)
    else collect(call, m)
  }

  onDeath(code, err) {
    if (this.dead) return
    this.kill()
    const call = this.current
    if (call) call.settle({ t: 'killed', code, message: code === 'OUT_OF_MEMORY' ? `the component ran out of memory (limit ${this.memoryMb} MB)` : String(err && err.message), stack: cleanStack(err && err.stack) })
  }

  kill() {
    if (this.dead) return
    this.dead = true
    if (slots.get(this.key) === this) {
      slots.delete(this.key)
      if (this.key.startsWith(META)) metaSlots--
    }
    this.worker.terminate().catch(() => {})
  }
}

// Idle workers past their idle time go, and the least recently used idle ones while over a bound:
// the runner's memory follows the components in use, not every component it ever loaded.
function evictIdle(keep = null, now = Date.now()) {
  for (const s of slots.values()) {
    const meta = s.key.startsWith(META)
    const over = meta ? metaSlots > MAX_META_WORKERS : slots.size - metaSlots > MAX_WORKERS
    if (s === keep || (!over && now - s.lastUsed < (meta ? META_IDLE_MS : IDLE_MS))) continue
    if (s.pending === 0) s.kill()
  }
}
const sweeper = setInterval(() => evictIdle(), Math.min(IDLE_MS, META_IDLE_MS, 60000))
sweeper.unref()

// The warm worker of `key` if it runs this bundle (shown as this file) with this env and memory limit, else a new one
// (the old one ended); BUNDLE_MISSING when a new one is needed and the code is not held.
export function slotFor(key, bundle, env, memoryMb) {
  const envKey = JSON.stringify(env)
  let s = slots.get(key)
  const file = bundle.file ?? null
  if (s && !s.dead && s.hash === bundle.hash && s.file === file && s.envKey === envKey && s.memoryMb === memoryMb) {
    slots.delete(key)
    slots.set(key, s)
    return s
  }
  if (s && !s.dead) s.kill()
  if (bundle.code === null) throw new RunnerError('BUNDLE_MISSING', `bundle ${bundle.hash} is not held by this process: resend with code`)
  s = new Slot(key, bundle.hash, bundle.code, env, envKey, memoryMb, file)
  slots.set(key, s)
  if (key.startsWith(META)) metaSlots++
  evictIdle(s)
  return s
}

export const slotStats = () => ({ workers: slots.size, meta_workers: metaSlots })

// Terminate all workers (used on shutdown).
export async function endSlots() {
  clearInterval(sweeper)
  await Promise.all([...slots.values()].map((s) => { s.kill(); return s.worker.terminate().catch(() => {}) }))
}
