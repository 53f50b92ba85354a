// The workers (docs/runner-protocol.md, "ping"). A worker hosts instances of one code: it is keyed
// by what it can run (the bundle's hash and file, the memory limit; `process.env` is set to each
// call's own env, which names its instance: PD_COMPONENT) and runs one call at a time; each
// instance it hosts has the bundle evaluated for it (its own module scope, worker.mjs), at most
// MAX_INSTANCES per worker (the least recently run one goes). A call of an instance goes to the
// worker it last ran on when that one is idle (its module state is there), else to an idle worker
// of the same code, which loads it (the instance moves: its old worker forgets it), else to a new
// worker. The workers of describe, additional_props and options are one per bundle (META). All
// are kept warm in an LRU and ended when idle too long or over a bound. A slot routes its worker's
// messages to the call in progress (calls.mjs) and ends that call when the worker dies: out of
// memory (V8's resourceLimits), an exit, a crash; its other instances load again elsewhere on
// their next call.
import { Worker } from 'node:worker_threads'
import { RunnerError } from './errors.mjs'
import { IDLE_MS, MAX_INSTANCES, MAX_META_WORKERS, MAX_WORKERS, META_IDLE_MS } from './limits.mjs'
import { collect, collectStream } from './results.mjs'
import { cleanStack } from './stacks.mjs'

const WORKER_FILE = new URL('./worker.mjs', import.meta.url)
const EGRESS_DIR = process.env.HEADWATER_EGRESS_DIR || null // the runner's egress directory (egress.mjs)
const PACKAGE_STORE = process.env.HEADWATER_PACKAGE_STORE || null // the shared package bundles (packages.mjs), read-only
export const META = 'describe:' // key prefix of describe, additional_props and options workers
export const META_INSTANCE = '' // the one instance a META worker hosts

const slots = new Map() // key -> Slot (Map order = LRU order); instance workers under `w<n>`
const byCode = new Map() // code key -> Set of the instance workers of that code
const homes = new Map() // instance -> the worker it last ran on (its module state is there)
let metaSlots = 0
let nextWorker = 1

class Slot {
  constructor(key, codeKey, hash, code, env, memoryMb, file = null) {
    this.key = key
    this.codeKey = codeKey
    this.hash = hash
    this.file = file
    this.memoryMb = memoryMb
    this.meta = key.startsWith(META)
    this.dead = false
    this.current = null // the call in progress (calls.mjs)
    this.pending = 0
    this.lastUsed = Date.now()
    // The instances evaluated in this worker, least recently run first: the worker keeps the same
    // list by the same rule (worker.mjs), and may drop one sooner when its heap is half full, so
    // this is where an instance is likely warm, not a promise.
    this.instances = new Map()
    this.worker = new Worker(WORKER_FILE, {
      workerData: { code, hash, file, egress: EGRESS_DIR, packageStore: PACKAGE_STORE, memoryMb, maxInstances: this.meta ? 1 : MAX_INSTANCES },
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

  // `instance` runs here next: the most recently run, loaded if it was not (the least recently run
  // one dropped past MAX_INSTANCES), and forgotten by the worker it ran on before, if another.
  host(instance) {
    if (this.meta) return
    const before = homes.get(instance)
    if (before && before !== this) {
      before.instances.delete(instance)
      if (!before.dead) before.worker.postMessage({ t: 'unload', instance })
    }
    homes.set(instance, this)
    if (this.instances.delete(instance) || this.instances.size < MAX_INSTANCES) {
      this.instances.set(instance, true)
      return
    }
    const [oldest] = this.instances.keys()
    this.instances.delete(oldest)
    if (homes.get(oldest) === this) homes.delete(oldest)
    this.instances.set(instance, true)
  }

  kill() {
    if (this.dead) return
    this.dead = true
    if (slots.get(this.key) === this) {
      slots.delete(this.key)
      if (this.meta) metaSlots--
    }
    const same = byCode.get(this.codeKey)
    if (same && same.delete(this) && same.size === 0) byCode.delete(this.codeKey)
    for (const instance of this.instances.keys()) if (homes.get(instance) === this) homes.delete(instance)
    this.instances.clear()
    this.worker.terminate().catch(() => {})
  }
}

// Idle workers past their idle time go, and the least recently used idle ones while over a bound:
// the runner's memory follows the components in use, not every component it ever loaded.
function evictIdle(keep = null, now = Date.now()) {
  for (const s of slots.values()) {
    const over = s.meta ? metaSlots > MAX_META_WORKERS : slots.size - metaSlots > MAX_WORKERS
    if (s === keep || (!over && now - s.lastUsed < (s.meta ? META_IDLE_MS : IDLE_MS))) continue
    if (s.pending === 0) s.kill()
  }
}
const sweeper = setInterval(() => evictIdle(), Math.min(IDLE_MS, META_IDLE_MS, 60000))
sweeper.unref()

function touch(s) {
  slots.delete(s.key)
  slots.set(s.key, s)
}

function start(key, codeKey, bundle, env, memoryMb) {
  if (bundle.code === null) throw new RunnerError('BUNDLE_MISSING', `bundle ${bundle.hash} is not held by this process: resend with code`)
  const s = new Slot(key, codeKey, bundle.hash, bundle.code, env, memoryMb, bundle.file ?? null)
  slots.set(key, s)
  if (s.meta) metaSlots++
  else {
    if (!byCode.has(codeKey)) byCode.set(codeKey, new Set())
    byCode.get(codeKey).add(s)
  }
  evictIdle(s)
  return s
}

// The worker of `instance`'s next call, for this bundle (shown as its file) and memory limit:
// the one it last ran on if idle; else an idle one of the same code (one with room for another
// instance, the most recently used; when the bound on workers is reached, a full one, its least
// recently run instance dropped); else a new one (idle workers over the bound ended, as they
// are whenever a worker starts). BUNDLE_MISSING when a new one is needed and the code is not held.
export function instanceSlot(instance, bundle, env, memoryMb) {
  const codeKey = JSON.stringify([bundle.hash, bundle.file ?? null, memoryMb])
  const home = homes.get(instance)
  let s = home && !home.dead && home.codeKey === codeKey && home.pending === 0 ? home : null
  if (s === null) {
    let full = null
    for (const w of byCode.get(codeKey) ?? []) {
      if (w.dead || w.pending !== 0) continue
      if (w.instances.size < MAX_INSTANCES) {
        if (s === null || w.lastUsed > s.lastUsed) s = w
      } else if (full === null) full = w
    }
    if (s === null && full !== null && slots.size - metaSlots >= MAX_WORKERS) s = full
  }
  if (s === null) s = start(`w${nextWorker++}`, codeKey, bundle, env, memoryMb)
  else touch(s)
  s.host(instance)
  return s
}

// The describe worker `key` if it runs this bundle with this env and memory limit, else a new one
// (the old one ended); BUNDLE_MISSING when a new one is needed and the code is not held.
export function metaSlot(key, bundle, env, memoryMb) {
  const codeKey = JSON.stringify([bundle.hash, bundle.file ?? null, JSON.stringify(env), memoryMb])
  const s = slots.get(key)
  if (s && !s.dead && s.codeKey === codeKey) {
    touch(s)
    return s
  }
  if (s && !s.dead) s.kill()
  return start(key, codeKey, bundle, env, memoryMb)
}

export function slotStats() {
  let instances = 0
  for (const s of slots.values()) instances += s.instances.size
  return { workers: slots.size, meta_workers: metaSlots, instances }
}

// Terminate all workers (used on shutdown).
export async function endSlots() {
  clearInterval(sweeper)
  await Promise.all([...slots.values()].map((s) => { s.kill(); return s.worker.terminate().catch(() => {}) }))
}
