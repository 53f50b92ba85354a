// The Node runner: `handle(request, onPartial?) -> response` (docs/runner-protocol.md).
// Each component instance runs in its own worker thread, kept warm in an LRU; bundles are kept
// in an LRU by hash. Timeouts terminate the worker; so does running out of memory (the heap by
// V8's resourceLimits, Buffers and other memory outside the heap by a watchdog), and so does a
// call that leaves work behind (worker.mjs reports it as `dirty`).
import { Worker } from 'node:worker_threads'
import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { cleanStack } from './stacks.mjs'

const WORKER_FILE = new URL('./worker.mjs', import.meta.url)
const EGRESS_DIR = process.env.HEADWATER_EGRESS_DIR || null // the runner's egress directory (egress.mjs)
const MEMORY_CHECK_MS = 50 // how often a running call's memory outside the heap is measured
const MAX_WORKERS = intEnv('HEADWATER_RUNNER_MAX_WORKERS', 64)
const IDLE_MS = intEnv('HEADWATER_RUNNER_IDLE_MS', 10 * 60 * 1000)
// Workers of describe, additional_props and options (one per bundle, not per instance): a
// registry publish describes hundreds of components once each, so only the few most recent stay
// loaded, briefly; each holds its component's whole module graph (tens of MB for an app's SDK).
const MAX_META_WORKERS = intEnv('HEADWATER_RUNNER_MAX_META_WORKERS', 2)
const META_IDLE_MS = intEnv('HEADWATER_RUNNER_META_IDLE_MS', 30 * 1000)
const META = 'describe:'
const MAX_BUNDLES = intEnv('HEADWATER_RUNNER_MAX_BUNDLES', 256)
const MAX_BUNDLE_BYTES = intEnv('HEADWATER_RUNNER_MAX_BUNDLE_BYTES', 64 * 1024 * 1024)
const DEFAULT_TIMEOUT_MS = 30000
const DEFAULT_MEMORY_MB = 256

function intEnv(name, dflt) {
  const v = Number.parseInt(process.env[name] ?? '', 10)
  return Number.isFinite(v) && v > 0 ? v : dflt
}
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

class RunnerError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

// ---- bundle LRU ------------------------------------------------------------------------------
const bundles = new Map() // hash -> code (Map order = LRU order)
let bundleBytes = 0

function rememberBundle(hash, code) {
  if (bundles.has(hash)) {
    bundles.delete(hash)
    bundles.set(hash, code)
    return
  }
  bundles.set(hash, code)
  bundleBytes += code.length
  for (const [h, c] of bundles) {
    if (bundles.size <= MAX_BUNDLES && bundleBytes <= MAX_BUNDLE_BYTES) break
    if (h === hash) continue
    bundles.delete(h)
    bundleBytes -= c.length
  }
}

// -> {hash, code|null}; code is null when a warm worker may already hold it.
function bundleOf(req) {
  const b = req.bundle
  if (!isObj(b)) throw new RunnerError('BAD_REQUEST', 'request has no bundle')
  let { hash, code } = b
  if (code !== undefined && code !== null && typeof code !== 'string') throw new RunnerError('BAD_REQUEST', 'bundle.code must be a string')
  if (typeof hash !== 'string' || hash === '') {
    if (typeof code !== 'string') throw new RunnerError('BAD_REQUEST', 'bundle needs a hash or code')
    hash = createHash('sha256').update(code).digest('hex')
  }
  if (typeof code === 'string') {
    rememberBundle(hash, code)
    return { hash, code }
  }
  const known = bundles.get(hash)
  if (known !== undefined) {
    bundles.delete(hash)
    bundles.set(hash, known)
    return { hash, code: known }
  }
  return { hash, code: null }
}

// ---- worker pool -----------------------------------------------------------------------------
const slots = new Map() // key -> Slot (Map order = LRU order)
let nextCallId = 1

class Slot {
  constructor(key, hash, code, env, envKey, memoryMb) {
    this.key = key
    this.hash = hash
    this.envKey = envKey
    this.memoryMb = memoryMb
    this.dead = false
    this.current = null // the call in progress
    this.pending = 0
    this.lastUsed = Date.now()
    this.worker = new Worker(WORKER_FILE, {
      workerData: { code, hash, egress: EGRESS_DIR },
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
    if (!call) return
    const message = s.endsWith('\n') ? s.slice(0, -1) : s
    call.logs.push({ level, message, ts: Date.now() })
  }

  onMessage(m) {
    const call = this.current
    if (!call || (m.c !== null && m.c !== call.callId)) return
    // Only the call's own id ends it (output while the bundle loads has none). Component code can
    // post here too, so this is not the bound: the service keeps its own clock (node_runner.py).
    if ((m.t === 'done' || m.t === 'fail') && m.c !== call.callId) return
    switch (m.t) {
      case 'log': call.logs.push({ level: m.level, message: m.message, ts: m.ts }); break
      case 'emit': call.emits.push({ event: m.event, meta: m.meta }); break
      case 'db': call.db_writes[m.key] = m.value; break
      case 'export': call.exports[m.name] = m.value; break
      case 'send': call.sends.push({ type: m.type, config: m.config }); break
      case 'respond':
        if (!call.response) {
          call.response = m.response
          if (call.onPartial) {
            try { call.onPartial({ id: call.reqId, partial: 'respond', response: m.response }) } catch { /* caller's problem */ }
          }
        }
        break
      case 'done':
      case 'fail':
        call.settle(m)
        break
    }
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
let metaSlots = 0
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

function slotFor(key, bundle, env, memoryMb) {
  const envKey = JSON.stringify(env)
  let s = slots.get(key)
  if (s && !s.dead && s.hash === bundle.hash && s.envKey === envKey && s.memoryMb === memoryMb) {
    slots.delete(key)
    slots.set(key, s)
    return s
  }
  if (s && !s.dead) s.kill()
  if (bundle.code === null) throw new RunnerError('BUNDLE_MISSING', `bundle ${bundle.hash} is not held by this process: resend with code`)
  s = new Slot(key, bundle.hash, bundle.code, env, envKey, memoryMb)
  slots.set(key, s)
  if (key.startsWith(META)) metaSlots++
  evictIdle(s)
  return s
}

// Run calls on the worker for `key`, one after another: `reqs` go in one message and the worker
// runs them back to back, so a batch costs one hand-off between the threads, not two per run.
// Resolves with the worker's final message of each call that ended, in order: all of them, or
// fewer when one was killed ({t: 'killed', code: 'TIMEOUT'|'OUT_OF_MEMORY'|...}, with the state
// collected so far) or left work behind (`dirty`): its worker is gone, and the caller sends the
// rest again on a fresh one. Calls on one key run one at a time, in arrival order.
const queues = new Map() // key -> tail promise
async function callWorker(key, bundle, env, memoryMb, op, reqs, timeoutMs, reqId, partialFor, onEnded = null) {
  const prev = queues.get(key)
  let release
  const mine = new Promise((r) => (release = r))
  const tail = prev ? prev.then(() => mine) : mine
  queues.set(key, tail)
  if (prev) await prev
  try {
    const s = slotFor(key, bundle, env, memoryMb)
    s.pending++
    try {
      return await dispatch(s, op, reqs, timeoutMs, reqId, partialFor, onEnded)
    } finally {
      s.pending--
      s.lastUsed = Date.now()
    }
  } finally {
    release()
    if (queues.get(key) === tail) queues.delete(key)
  }
}

// `onEnded(i, m)` hears of each call as it ends (the service times each run by when it hears of it).
function dispatch(s, op, reqs, timeoutMs, reqId, partialFor, onEnded) {
  return new Promise((resolve) => {
    const ended = []
    let timer = null
    let watch = null
    let started = 0
    const calls = reqs.map((req, i) => {
      const call = {
        callId: nextCallId++, reqId, onPartial: partialFor ? partialFor(i) : null,
        emits: [], logs: [], db_writes: {}, exports: {}, sends: [], response: null,
        settle(m) {
          if (s.current !== call) return
          s.current = null
          clearTimeout(timer)
          clearTimeout(watch)
          timer = watch = null
          if (m.dirty) s.kill() // the call left timers, sockets or handles running: a fresh worker next time
          m.state = call
          m.duration_ms = Math.round((performance.now() - started) * 1000) / 1000 // measured here: the component cannot touch this clock
          ended.push(m)
          if (onEnded) onEnded(ended.length - 1, m)
          if (ended.length < calls.length && !s.dead) begin(calls[ended.length])
          else resolve(ended)
        },
      }
      return call
    })
    // V8's limit covers the heap only; Buffers and ArrayBuffers count here (and the runner's
    // cgroup bounds the whole process whatever happens between two checks).
    const limit = s.memoryMb * 1024 * 1024
    const check = () => {
      watch = null
      const call = s.current
      s.worker.getHeapStatistics().then((h) => {
        if (s.current !== call || call === null) return
        if (h.used_heap_size + h.external_memory > limit) s.onDeath('OUT_OF_MEMORY', null)
        else if (watch === null) watch = setTimeout(check, MEMORY_CHECK_MS)
      }, () => {})
    }
    // Each call's time (and timeout) starts when the one before it ended: the worker starts it right then.
    const begin = (call) => {
      s.current = call
      started = performance.now()
      timer = setTimeout(() => {
        s.kill()
        call.settle({ t: 'killed', code: 'TIMEOUT', message: `the component did not finish within ${timeoutMs} ms`, stack: null })
      }, timeoutMs)
      watch = setTimeout(check, MEMORY_CHECK_MS)
    }
    begin(calls[0])
    s.worker.postMessage({ t: 'calls', list: calls.map((call, i) => ({ c: call.callId, op, req: reqs[i] })) })
  })
}

// ---- ops -------------------------------------------------------------------------------------
function timeoutOf(req) {
  const t = req.timeout_ms
  return Number.isFinite(t) && t > 0 ? t : DEFAULT_TIMEOUT_MS
}
function memoryOf(req) {
  const m = req.memory_mb
  return Number.isFinite(m) && m > 0 ? Math.round(m) : DEFAULT_MEMORY_MB
}
function envOf(req) {
  if (req.env === undefined || req.env === null) return {}
  if (!isObj(req.env)) throw new RunnerError('BAD_REQUEST', 'env must be an object')
  const env = {}
  for (const [k, v] of Object.entries(req.env)) if (v !== undefined && v !== null) env[k] = String(v)
  return env
}

async function runOp(req, onPartial) {
  if (typeof req.instance !== 'string' || req.instance === '') throw new RunnerError('BAD_REQUEST', `${req.op} needs an instance`)
  if (req.op === 'hook' && typeof req.hook !== 'string') throw new RunnerError('BAD_REQUEST', 'hook needs a hook name')
  const bundle = bundleOf(req)
  if (req.op === 'run' && req.events !== undefined) return runMany(req, bundle, onPartial)
  const wreq = { props: req.props, db: req.db, event: req.event, http: req.http, hook: req.hook, steps: req.steps }
  return runOne(req, bundle, wreq, onPartial)
}

// Several events of one instance in one request, one after another on its worker, each run
// seeing the `db` its predecessors left: the same as that many `run` requests in a row, without
// a round trip to the service for each, and in one message to the worker. Each event's outcome is
// sent as a `result` partial as soon as it is known (so a runner that dies mid-way loses only the
// runs not yet reported), and partials carry the event's `index`. A run that times out, runs out
// of memory or leaves work behind ends its worker; the events after it go to a fresh one.
async function runMany(req, bundle, onPartial) {
  if (!Array.isArray(req.events)) throw new RunnerError('BAD_REQUEST', 'events must be an array')
  let db = isObj(req.db) ? { ...req.db } : {}
  const report = onPartial || (() => {})
  const failed = (index, e) => {
    const error = { code: e instanceof RunnerError ? e.code : 'RUNTIME_ERROR', message: e instanceof Error ? e.message : String(e) }
    if (e && typeof e.stack === 'string' && (e.fromWorker || !(e instanceof RunnerError))) error.stack = cleanStack(e.stack)
    report({ id: req.id, partial: 'result', ok: false, error, index })
  }
  let index = 0
  while (index < req.events.length) {
    const first = index
    // Only the first carries the db: the worker hands each run's db on to the next.
    const wreqs = req.events.slice(first).map((event, i) => ({ props: req.props, db: i === 0 ? db : undefined, event, http: req.http }))
    // Each run is reported the moment it ends, not when its batch does.
    const ended = (_, m) => {
      try {
        const result = resultOf(m)
        db = { ...db, ...result.db_writes }
        for (const [k, v] of Object.entries(result.db_writes)) if (v === null || v === undefined) delete db[k]
        report({ id: req.id, partial: 'result', ok: true, result, index })
      } catch (e) {
        failed(index, e)
      }
      index++
    }
    try {
      await callWorker(req.instance, bundle, envOf(req), memoryOf(req), req.op, wreqs, timeoutOf(req), req.id,
        (i) => (p) => report({ ...p, index: first + i }), ended)
    } catch (e) {
      if (e instanceof RunnerError && e.code === 'BUNDLE_MISSING') throw e // the service resends with code
      failed(index++, e)
      continue
    }
  }
  return { count: req.events.length }
}

async function runOne(req, bundle, wreq, onPartial) {
  const [m] = await callWorker(req.instance, bundle, envOf(req), memoryOf(req), req.op, [wreq], timeoutOf(req), req.id, () => onPartial)
  return resultOf(m)
}

// A call's final message as a run result (a `fail` is thrown: the call did not run).
function resultOf(m) {
  if (m.t === 'fail') throw Object.assign(new RunnerError(m.error.code, m.error.message), { stack: m.error.stack ?? undefined, fromWorker: true })
  const st = m.state
  let error = null
  if (m.t === 'killed') error = { code: m.code, name: m.code === 'TIMEOUT' ? 'TimeoutError' : m.code === 'OUT_OF_MEMORY' ? 'OutOfMemoryError' : 'Error', message: m.message, stack: cleanStack(m.stack) }
  else error = m.error ?? null
  const result = {
    emits: st.emits,
    db_writes: st.db_writes,
    logs: st.logs,
    response: st.response,
    error,
    duration_ms: m.duration_ms,
  }
  if ('return_value' in m || Object.keys(st.exports).length || st.sends.length) {
    result.return_value = m.return_value ?? null
    result.exports = st.exports
    result.sends = st.sends
    if (m.flow_exit) result.flow_exit = m.flow_exit
  }
  return result
}

async function metaOp(req) {
  const bundle = bundleOf(req)
  const wreq = { props: req.props, prop: req.prop, page: req.page, prevContext: req.prevContext, query: req.query }
  const [m] = await callWorker(`${META}${bundle.hash}`, bundle, envOf(req), memoryOf(req), req.op, [wreq], timeoutOf(req), req.id, null)
  if (m.t === 'done') return m.result
  if (m.t === 'fail') throw Object.assign(new RunnerError(m.error.code, m.error.message), { stack: m.error.stack ?? undefined, fromWorker: true })
  throw Object.assign(new RunnerError(m.code, m.message), { stack: cleanStack(m.stack) ?? undefined, fromWorker: true })
}

const OPS = {
  ping: async () => ({ pong: true, pid: process.pid, node: process.version, ...stats() }),
  describe: metaOp,
  additional_props: metaOp,
  options: (req) => {
    if (typeof req.prop !== 'string') throw new RunnerError('BAD_REQUEST', 'options needs a prop name')
    return metaOp(req)
  },
  run: runOp,
  hook: runOp,
}

export async function handle(request, onPartial) {
  const id = isObj(request) ? request.id ?? null : null
  try {
    if (!isObj(request)) throw new RunnerError('BAD_REQUEST', 'the request must be a JSON object')
    const op = OPS[request.op]
    if (!op || !Object.hasOwn(OPS, request.op)) throw new RunnerError('BAD_REQUEST', `unknown op ${JSON.stringify(request.op)}`)
    const result = await op(request, onPartial)
    return { id, ok: true, result }
  } catch (e) {
    const code = e instanceof RunnerError ? e.code : 'RUNTIME_ERROR'
    const error = { code, message: e instanceof Error ? e.message : String(e) }
    // Stacks keep the component's frames only: nothing of the runner or the host (stacks.mjs).
    if (e && e.fromWorker && typeof e.stack === 'string') error.stack = cleanStack(e.stack)
    else if (!(e instanceof RunnerError) && e && typeof e.stack === 'string') error.stack = cleanStack(e.stack)
    return { id, ok: false, error }
  }
}

// Counts for monitoring.
export function stats() {
  return { workers: slots.size, meta_workers: metaSlots, bundles: bundles.size, bundle_bytes: bundleBytes }
}

// Terminate all workers (used on shutdown).
export async function shutdown() {
  clearInterval(sweeper)
  await Promise.all([...slots.values()].map((s) => { s.kill(); return s.worker.terminate().catch(() => {}) }))
}
