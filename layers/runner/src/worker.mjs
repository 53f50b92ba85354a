// Instances of one code in a worker thread, one call at a time. The bundle is compiled once, when
// the worker starts, and evaluated for each instance the first time it runs here: each has its own
// CommonJS module scope and require cache, so module-level state is per instance; globalThis and
// the builtins are the worker's, shared by the instances it hosts (all of one code, one account: a
// runner process serves one namespace); `process.env` is set to each call's env. Each call then
// builds `this` and runs. Emits, logs, db writes, exports, sends and the HTTP response are posted
// to the main thread as they happen, so a run killed for a timeout or for running out of memory
// still reports what it did. Before the bundle is evaluated, the worker is confined (confine.mjs,
// egress.mjs, stacks.mjs): no nested workers, network only through the egress proxy, no listening,
// stacks without runner frames; when a call ends, what it started is ended too.
import { parentPort, workerData } from 'node:worker_threads'
import { createRequire, isBuiltin } from 'node:module'
import vm from 'node:vm'
import v8 from 'node:v8'
import { fileURLToPath } from 'node:url'
import util from 'node:util'
import { handOn, serviceDb } from './db.mjs'
import { pickComponent, validateComponent, describe, resolveProps, normalizeProp } from './component.mjs'
import { installEgress, closeSockets } from './egress.mjs'
import { answerNativesBinding, denyWorkers, trackTimers, publish, snapshot, endCall } from './confine.mjs'
import { installStackFilter, cleanStack } from './stacks.mjs'
import { packageFile } from './packages.mjs'

const egressSockets = workerData.egress ? installEgress(workerData.egress) : new Set()
denyWorkers()
answerNativesBinding()
const realTimers = trackTimers()
publish()
installStackFilter(workerData.code, workerData.file)

const nodeRequire = createRequire(import.meta.url)
const post = (m) => parentPort.postMessage(m)
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const IDLE = -1 // `cur` between calls: output then belongs to no call (the main thread drops it)
let cur = null // id of the call in progress (for console output); null while the bundle loads

// ---- console capture -------------------------------------------------------------------------
const levelOf = { log: 'log', info: 'info', warn: 'warn', error: 'error', debug: 'debug' }
for (const [method, level] of Object.entries(levelOf)) {
  console[method] = (...args) => post({ t: 'log', c: cur, level, message: util.format(...args), ts: Date.now() })
}
console.trace = (...args) => {
  const stack = (new Error().stack || '').split('\n').slice(1).join('\n') // component frames only (stacks.mjs)
  post({ t: 'log', c: cur, level: 'debug', message: `Trace: ${util.format(...args)}\n${stack}`, ts: Date.now() })
}
console.dir = (obj, opts) => post({ t: 'log', c: cur, level: 'log', message: util.inspect(obj, { customInspect: false, ...opts }), ts: Date.now() })
// Anything else (console.table, time, count, process.stdout.write...) goes to the worker's own
// stdout/stderr, which the main thread reads and records as logs too.

// ---- load the bundle -------------------------------------------------------------------------
function notFound(id) {
  const e = new Error(`Cannot find module '${id}': only node builtins can be required at run time (npm packages are bundled at deploy)`)
  e.code = 'MODULE_NOT_FOUND'
  return e
}
// `@pipedream/platform` is the runner's own module (platform/index.js), the same for every
// component: bundles leave it external (esbuild.mjs) instead of carrying a copy of it and its
// axios each. Required, it is what the published CommonJS package is: its exports, `default`
// and `__esModule` (frozen: a component cannot change it under its own other modules).
const PLATFORM_FILE = fileURLToPath(new URL('../platform/index.js', import.meta.url))
let platform = null
function platformModule() {
  if (platform === null) {
    platform = Object.freeze(Object.defineProperty({ ...nodeRequire(PLATFORM_FILE) }, '__esModule', { value: true }))
  }
  return platform
}
// The shared package store (packages.mjs): a component bundle's `hw-package:` id is a file there,
// read and compiled once per worker and evaluated once per instance (its module state is the
// instance's, as when the package was inlined). `packageFile` refuses any id that is not a
// well-formed name@version/subpath, or whose file is not inside the store once links are followed.
const compiledPackages = new Map() // id -> compiled function
function packageModule(id, cache) {
  if (Object.hasOwn(cache, id)) return cache[id].exports
  let fn = compiledPackages.get(id)
  if (fn === undefined) {
    const file = packageFile(workerData.packageStore, id)
    if (file === null) throw notFound(id)
    fn = vm.compileFunction(file.text, ['exports', 'require', 'module', '__filename', '__dirname'], {
      filename: file.name,
      importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    })
    compiledPackages.set(id, fn)
  }
  const mod = { exports: {}, id, filename: id, loaded: false, children: [], paths: [] }
  cache[id] = mod
  try {
    fn.call(mod.exports, mod.exports, requireFor(mod, cache), mod, id, '/')
  } catch (e) {
    delete cache[id]
    throw e
  }
  mod.loaded = true
  return mod.exports
}
function safeRequire(id, cache) {
  if (typeof id === 'string' && isBuiltin(id)) return nodeRequire(id)
  if (id === '@pipedream/platform') return platformModule()
  if (typeof id === 'string' && id.startsWith('hw-package:')) return packageModule(id, cache)
  throw notFound(id)
}
// Each instance's `require`, with its own `main` and cache (its package modules, shared by the
// modules it loads: one evaluation of a package per instance).
function requireFor(mod, packages = Object.create(null)) {
  const req = (id) => safeRequire(id, packages)
  req.resolve = (id) => {
    if (typeof id === 'string' && (isBuiltin(id) || id === '@pipedream/platform')) return id
    throw notFound(id)
  }
  req.cache = packages
  req.main = mod
  return req
}

function errInfo(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'message' in e)) {
    return { name: String(e.name || 'Error'), message: String(e.message), stack: typeof e.stack === 'string' ? cleanStack(e.stack) : null }
  }
  return { name: 'Error', message: String(e), stack: null }
}

const FILENAME = '/component.js'
let compiled = null // the bundle as a function, compiled once (each call of it is a fresh module scope)

// An instance: the bundle evaluated for it, {C: the component, PROPS: [[name, resolvedDef,
// declared], ...], TYPE}, or {loadError}.
// A bundle with top-level await is the body of an async function (esbuild.mjs, ASYNC_MARK): its
// instance is a promise of one.
const ASYNC = workerData.code.startsWith('/* headwater: top-level await */')
function load() {
  try {
    if (compiled === null) {
      const code = ASYNC ? `return (async () => {${workerData.code}\n})()` : workerData.code
      compiled = vm.compileFunction(code, ['exports', 'require', 'module', '__filename', '__dirname'], {
        filename: FILENAME,
        importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
      })
    }
    const mod = { exports: {}, id: '.', filename: FILENAME, loaded: false, children: [], paths: [] }
    const returned = compiled.call(mod.exports, mod.exports, requireFor(mod), mod, FILENAME, '/')
    if (ASYNC) return returned.then((exports) => instance(mod, exports), loadFailure)
    return instance(mod, mod.exports)
  } catch (e) {
    return loadFailure(e)
  }
}

function instance(mod, exports) {
  try {
    mod.loaded = true
    const v = validateComponent(pickComponent(exports))
    return { C: v.component, PROPS: v.props, TYPE: v.type, loadError: null }
  } catch (e) {
    return loadFailure(e)
  }
}

function loadFailure(e) {
  const i = errInfo(e)
  return { loadError: { code: 'LOAD_ERROR', message: e && e.code === 'LOAD_ERROR' ? i.message : `${i.name}: ${i.message}`, stack: e && e.code === 'LOAD_ERROR' ? null : i.stack } }
}

// The instances loaded here, least recently run first (slots.mjs keeps the same list): at most
// `maxInstances`, and while the heap is over half the memory limit one fewer at each new load,
// so that instances kept warm do not take the memory of the one that runs.
const loaded = new Map()
const MAX_INSTANCES = workerData.maxInstances ?? 1
const HEAP_SHARE = (workerData.memoryMb ?? 256) * 1024 * 1024 / 2
function instanceOf(id) {
  let inst = loaded.get(id)
  if (inst !== undefined) {
    loaded.delete(id)
    loaded.set(id, inst)
    return inst
  }
  while (loaded.size >= MAX_INSTANCES) loaded.delete(loaded.keys().next().value)
  if (loaded.size > 0 && v8.getHeapStatistics().used_heap_size > HEAP_SHARE) loaded.delete(loaded.keys().next().value)
  inst = load()
  loaded.set(id, inst)
  return inst
}

// ---- helpers ---------------------------------------------------------------------------------
function toJSON(v) {
  const s = JSON.stringify(v)
  return s === undefined ? undefined : JSON.parse(s)
}
function toJSONSafe(v) {
  try {
    return toJSON(v)
  } catch {
    const seen = new WeakSet()
    const s = JSON.stringify(v, (k, x) => {
      if (typeof x === 'bigint') return x.toString()
      if (x && typeof x === 'object') {
        if (seen.has(x)) return '[Circular]'
        seen.add(x)
      }
      return x
    })
    return s === undefined ? undefined : JSON.parse(s)
  }
}

function runError(e) {
  const i = errInfo(e)
  if (i.name === 'ConfigurationError') {
    return { code: 'CONFIGURATION_ERROR', name: i.name, message: i.message, stack: e && e.exposeStack ? i.stack : null }
  }
  return { code: 'RUNTIME_ERROR', name: i.name, message: i.message, stack: i.stack }
}

class EndSignal extends Error {
  constructor(reason) {
    super(reason === undefined ? '' : String(reason))
    this.name = 'EndSignal'
    this.__pd_end = true
    this.reason = reason === undefined ? null : String(reason)
  }
}

function encodeResponse(r) {
  if (!isObj(r)) r = {}
  let status = r.status
  if (typeof status === 'string' && /^\s*\d+\s*$/.test(status)) status = Number(status)
  if (!Number.isInteger(status) || status < 100 || status > 599) {
    throw new Error('respond() status must be an integer from 100 to 599')
  }
  const headers = {}
  if (isObj(r.headers)) {
    for (const [k, v] of Object.entries(r.headers)) {
      if (v === undefined || v === null) continue
      headers[k] = Array.isArray(v) ? v.map(String) : String(v)
    }
  }
  let body = r.body
  let b64 = false
  if (body === undefined || body === null) body = ''
  else if (typeof body === 'string') { /* as is */ }
  else if (Buffer.isBuffer(body) || body instanceof Uint8Array) {
    body = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('base64')
    b64 = true
  } else if (body instanceof ArrayBuffer) {
    body = Buffer.from(body).toString('base64')
    b64 = true
  } else {
    body = JSON.stringify(body) ?? ''
    if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json'
  }
  return { status, headers, body, body_base64: b64 }
}

// Per-call context: the channels back to the main thread, bound to this call's id so that work
// a previous run left behind (timers) is not reported as part of a later run.
function makeCtx(c, req) {
  let responded = false
  const respond = (r) => {
    const response = encodeResponse(r)
    if (responded) return
    responded = true
    post({ t: 'respond', c, response })
  }
  const emit = (event, meta) => {
    const e = toJSON(event)
    const m = isObj(meta) ? toJSON(meta) : {}
    post({ t: 'emit', c, event: e === undefined ? null : e, meta: m })
  }
  const db = serviceDb(req.db, (key, value) => post({ t: 'db', c, key, value }))
  const send = (type) => (config) => {
    post({ t: 'send', c, type, config: toJSONSafe(config) ?? null })
  }
  const $ = {
    export(name, value) {
      post({ t: 'export', c, name: String(name), value: toJSONSafe(value) ?? null })
    },
    respond,
    flow: {
      exit(reason) {
        throw new EndSignal(reason)
      },
    },
    send: { http: send('http'), email: send('email'), emit: send('emit'), s3: send('s3'), sse: send('sse') },
  }
  const http = { endpoint: (isObj(req.http) && req.http.endpoint) || null, respond }
  return { emit, db: db.prop, writes: db.writes, http, $ }
}

function buildApp(def, value) {
  const app = { ...def }
  delete app.methods
  app.$auth = isObj(value) && isObj(value.$auth) ? value.$auth : {}
  if (isObj(def.methods)) {
    for (const [k, f] of Object.entries(def.methods)) if (typeof f === 'function') app[k] = f.bind(app)
  }
  return app
}

let axiosMod = null
async function getAxios() {
  if (!axiosMod) axiosMod = (await import('axios')).default
  return axiosMod
}
function buildHttpRequest(v) {
  const cfg = isObj(v) ? { ...v } : {}
  return Object.assign(cfg, {
    async execute() {
      const axios = await getAxios()
      const res = await axios({ url: cfg.url, method: cfg.method || 'GET', headers: cfg.headers, params: cfg.params, data: cfg.body })
      // the axios response, as components read it (`status`, `headers`, `data`)
      const headers = res.headers && typeof res.headers.toJSON === 'function' ? res.headers.toJSON() : { ...res.headers }
      return { status: res.status, statusText: res.statusText, headers, data: res.data }
    },
  })
}

function propValue(name, def, values, ctx, apps) {
  const given = Object.hasOwn(values, name)
  switch (def.type) {
    case '$.service.db': return ctx.db
    case '$.interface.http': return ctx.http
    case 'app': {
      const a = buildApp(def, values[name])
      apps.push([def, a])
      return a
    }
    case 'http_request': return buildHttpRequest(given ? values[name] : def.default)
    default: return given ? values[name] : def.default
  }
}

function buildThis(I, ctx, req, props = I.PROPS) {
  const self = {}
  const apps = []
  const values = isObj(req.props) ? req.props : {}
  const declared = new Set()
  for (const [name, def, decl] of props) {
    declared.add(name)
    self[name] = propValue(name, def, values, ctx, apps)
    if (def.type === 'app' && isObj(decl)) apps.push([decl, self[name]])
  }
  for (const [k, v] of Object.entries(values)) if (!declared.has(k)) self[k] = v
  if (isObj(I.C.methods)) {
    for (const [k, f] of Object.entries(I.C.methods)) if (typeof f === 'function') self[k] = f.bind(self)
  }
  self.$emit = ctx.emit
  Object.defineProperty(self, '__apps', { value: apps, enumerable: false })
  return self
}

// The app instance a propDefinition refers to (the configured app prop when there is one).
function appFor(self, appDef) {
  for (const [d, inst] of self.__apps) if (d === appDef) return inst
  for (const [d, inst] of self.__apps) if (isObj(appDef) && d.app === appDef.app) return inst
  return buildApp(isObj(appDef) ? appDef : {}, undefined)
}

// ---- calls -----------------------------------------------------------------------------------
let active = null // { c, finish }

async function runOp(I, m, finish) {
  const { C, TYPE } = I
  const req = m.req
  const ctx = makeCtx(m.c, req)
  m.writes = ctx.writes // what the next call of a batch starts from (onCalls)
  let error = null
  let ret
  let exit
  try {
    const self = buildThis(I, ctx, req)
    if (m.op === 'hook') {
      const fn = isObj(C.hooks) ? C.hooks[req.hook] : undefined
      if (typeof fn === 'function') ret = await fn.call(self)
    } else if (typeof C.run === 'function') {
      if (TYPE === 'action') ret = await C.run.call(self, { $: ctx.$, steps: isObj(req.steps) ? req.steps : {} })
      else ret = await C.run.call(self, req.event)
    } else {
      self.$emit(req.event, {}) // timer source without run: emit the timer event
    }
  } catch (e) {
    if (e && e.__pd_end === true) exit = { reason: e.reason ?? null }
    else error = runError(e)
  }
  const msg = { t: 'done', c: m.c, error }
  if (TYPE === 'action') {
    msg.return_value = toJSONSafe(ret) ?? null
    if (exit) msg.flow_exit = exit
  }
  finish(msg)
}

async function describeOp(I, m, finish) {
  finish({ t: 'done', c: m.c, result: toJSONSafe(describe(I.C, I.PROPS)) })
}

// additionalProps()'s props merged over the declared ones; an entry left undefined is no prop (as
// JSON would carry it: registry components leave out one they add only in some cases that way)
function propsWith(I, extra) {
  if (!isObj(extra)) return I.PROPS
  const added = Object.fromEntries(Object.entries(extra).filter(([, p]) => p !== undefined))
  return resolveProps({ ...(isObj(I.C.props) ? I.C.props : {}), ...added })
}

async function additionalPropsOp(I, m, finish) {
  const { C, PROPS } = I
  let props = PROPS
  if (typeof C.additionalProps === 'function') {
    const ctx = makeCtx(m.c, m.req)
    const self = buildThis(I, ctx, m.req)
    const prev = Object.fromEntries(PROPS.map(([n, , decl]) => [n, decl]))
    props = propsWith(I, await C.additionalProps.call(self, prev))
  }
  finish({ t: 'done', c: m.c, result: toJSONSafe({ configurable_props: props.map(([n, d]) => normalizeProp(n, d)) }) })
}

async function optionsOp(I, m, finish) {
  const { C, PROPS } = I
  const req = m.req
  const ctx = makeCtx(m.c, req)
  let props = PROPS
  let entry = props.find(([n]) => n === req.prop)
  if (!entry && typeof C.additionalProps === 'function') {
    const self = buildThis(I, ctx, req)
    const prev = Object.fromEntries(PROPS.map(([n, , decl]) => [n, decl]))
    props = propsWith(I, await C.additionalProps.call(self, prev))
    entry = props.find(([n]) => n === req.prop)
  }
  if (!entry) return finish({ t: 'fail', c: m.c, error: { code: 'BAD_REQUEST', message: `the component has no prop "${req.prop}"` } })
  const [, def, decl] = entry
  if (Array.isArray(def.options)) return finish({ t: 'done', c: m.c, result: toJSONSafe({ options: def.options, context: null }) })
  if (typeof def.options !== 'function') {
    return finish({ t: 'fail', c: m.c, error: { code: 'BAD_REQUEST', message: `prop "${req.prop}" has no options` } })
  }
  const self = buildThis(I, ctx, req, props)
  let thisArg = self
  const values = isObj(req.props) ? req.props : {}
  let args = { page: Number.isInteger(req.page) ? req.page : 0, prevContext: isObj(req.prevContext) ? req.prevContext : {} }
  if (typeof req.query === 'string') args.query = req.query
  if (isObj(decl) && Array.isArray(decl.propDefinition) && !Object.hasOwn(decl, 'options')) {
    const [appDef, , inputValues] = decl.propDefinition
    thisArg = appFor(self, appDef)
    const iv = typeof inputValues === 'function' ? inputValues(values) : inputValues
    if (isObj(iv)) args = { ...iv, ...args }
  }
  const r = await def.options.call(thisArg, args)
  let options = []
  let context = null
  if (Array.isArray(r)) options = r
  else if (isObj(r)) {
    options = Array.isArray(r.options) ? r.options : []
    context = r.context ?? null
  }
  if (typeof def.mapper === 'function') options = options.map((o) => def.mapper.call(thisArg, o))
  finish({ t: 'done', c: m.c, result: toJSONSafe({ options, context }) })
}

const OPS = { run: runOp, hook: runOp, describe: describeOp, additional_props: additionalPropsOp, options: optionsOp }

// One call of `instance`; resolves with its last message once that is posted.
function onCall(instance, m) {
  return new Promise((resolve) => {
    cur = m.c
    let finished = false
    // The call's last message goes once what it started is ended; `dirty` lists what could not be
    // (the main thread then replaces this worker).
    const conclude = (msg, left) => {
      if (left.length) msg.dirty = left
      cur = IDLE
      post(msg)
      resolve(msg)
    }
    const finish = (msg) => {
      if (finished) return
      finished = true
      if (active && active.c === m.c) active = null
      const left = endCall(realTimers, baseline, closeSockets(egressSockets))
      if (Array.isArray(left)) conclude(msg, left)
      else left.then((l) => conclude(msg, l), () => conclude(msg, ['unknown']))
    }
    active = { c: m.c, op: m.op, finish }
    const call = (I) => {
      if (I.loadError) return finish({ t: 'fail', c: m.c, error: I.loadError })
      const op = OPS[m.op]
      if (!op) return finish({ t: 'fail', c: m.c, error: { code: 'BAD_REQUEST', message: `unknown op ${m.op}` } })
      op(I, m, finish).catch((e) => {
        const err = e && e.code === 'LOAD_ERROR' ? { code: 'LOAD_ERROR', message: e.message } : runError(e)
        finish({ t: 'fail', c: m.c, error: err })
      })
    }
    const I = instanceOf(instance) // loaded in the call: its output and its time are the call's
    if (typeof I.then === 'function') I.then(call)
    else call(I)
  })
}

// The calls of one message, in turn, each run's db handed on to the next (db.mjs; only the first
// call carries one); a call that leaves work behind ends the batch, since this worker is then
// replaced.
async function onCalls(instance, env, list) {
  setEnv(env)
  let db = null // what the call before left
  for (const m of list) {
    if (db !== null && isObj(m.req)) m.req.db = db
    const msg = await onCall(instance, m)
    if (msg.dirty) return
    if (m.writes) db = handOn(isObj(m.req) ? m.req.db : null, m.writes)
  }
}

// `process.env` is the calls' own (the request's `env`, which names the instance: PD_COMPONENT),
// set before they run and before an instance is evaluated for them: what the worker started with
// is the env of whichever instance came first.
function setEnv(env) {
  const penv = process.env
  for (const k of Object.keys(penv)) if (!Object.hasOwn(env, k)) delete penv[k]
  for (const [k, v] of Object.entries(env)) if (penv[k] !== String(v)) penv[k] = String(v)
}

function crash(e) {
  if (!active) {
    post({ t: 'log', c: cur, level: 'error', message: `Unhandled error: ${util.inspect(e)}`, ts: Date.now() })
    return
  }
  const err = runError(e)
  if (active.op === 'run' || active.op === 'hook') active.finish({ t: 'done', c: active.c, error: err })
  else active.finish({ t: 'fail', c: active.c, error: err })
}
process.on('uncaughtException', crash)
process.on('unhandledRejection', crash)

parentPort.on('message', (m) => {
  if (m && m.t === 'calls' && Array.isArray(m.list)) onCalls(String(m.instance ?? ''), isObj(m.env) ? m.env : {}, m.list)
  else if (m && m.t === 'unload') loaded.delete(m.instance) // it runs on another worker now (slots.mjs)
})
const baseline = snapshot() // what a clean worker has active; instances load at their first call
