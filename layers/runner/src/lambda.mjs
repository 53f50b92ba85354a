// AWS Lambda entry point: the event is the request (docs/runner-protocol.md). Partial `respond`
// lines have no channel back on Lambda, so they are collected into `partials` of the response.
//
// Component code never runs in this process: this process's environment holds the Lambda role's
// credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and the runtime API's
// address. It runs in a child process (stdio.mjs, the local runner's driver) started with an
// empty environment and Node's permission model (no child processes, no addons, file reads only
// of the runner code and /tmp/runner), kept warm across invocations and started again if it dies
// (docs/security.md, "AWS").
//
// The child has no network of its own: it is started through the seccomp launcher
// (launcher/launcher.c), under which it can make no socket but AF_UNIX, so the Lambda runtime API
// on loopback is out of its reach at any moment. Its component code's connections go through an
// egress proxy in this process (lambda-egress.mjs: the local runner's protocol, the URL policy,
// loopback always refused), reached through a control socket outside /tmp/runner. Without the
// launcher, or when it cannot install its filter, no component code runs: the call fails.
//
// This process makes itself non-dumpable at start (launcher/undumpable.c): the child runs as the
// same user, and a same-user process may open a dumpable one's /proc/<pid>/mem and environ. A
// non-dumpable one's ask for CAP_SYS_PTRACE, which a Lambda function has not. If that fails, no
// component code runs either.
//
// Between invocations the child is stopped (SIGSTOP, which it cannot catch or ignore): from the
// moment its answer is read until the next call of its account is written to it (SIGCONT), none of
// its code runs. That is the window in which the Lambda runtime API would hand the environment's
// next invocation, perhaps another account's, to whoever asks for it (docs/security.md, "The
// Lambda runtime API"): closed by the filter too, kept as a second line. The handler returns only
// once every thread of the child is stopped. A child still holding a connection to the runtime API
// then (possible only without the filter) is killed and its call fails closed. A call unanswered past its limit (plus a grace) kills the child: `TIMEOUT`.
//
// Bundling happens here too (op `bundle`, docs/aws.md "Bundles"): bundle.mjs in a child process
// with no credentials in its environment, its npm store and cache under /tmp; the bundle is kept
// in /tmp/bundles and, when the request carries `put` (presigned PUT URLs of
// `bundles/<sha256>.cjs` and `bundles/<sha256>.json` in the bundle bucket), put there, the .json
// ({packages}) last; the answer is {hash, packages}. A run whose bundle this container has not got
// is given it from /tmp or through the request's presigned GET (`bundle.url`) before the caller is
// told BUNDLE_MISSING, so bundles do not travel in payloads.
//
// This function's role has no AWS permission but its own logs: the bucket is reached only through
// the URLs the trusted caller signed for this one request, and no AWS SDK is loaded here.
//
// Tenant isolation (docs/aws.md "Tenant isolation"): the function runs in Lambda's tenant isolation
// mode, every invocation naming a tenant (`context.tenantId`), and Lambda gives an execution
// environment to one tenant only. The callers name the run's account as its tenant and the bundle op
// as the tenant `bundler`; this process holds to it as well (`admit`): the environment keeps the
// tenant of its first invocation and refuses any other, the bundle op is refused but as `bundler`,
// and that tenant runs no component code. Invoked with no tenant (a function made without the mode,
// tests), it serves the accounts in turn, a fresh child for each, as before.
//
// Bundles are kept by the SHA-256 of their content (`bundle.sha256` of a run, recorded when the
// bundle was made): a bundle is loaded from /tmp/bundles or the bucket only if its content hashes to
// that name, so neither carries one tenant's writing into another's runs (BUNDLE_CORRUPT otherwise).
//
// The child is a process group of its own (group.mjs): the stop between invocations, the resume and
// the kill reach whatever it forked too, and under the launcher nothing it forks can leave the group.
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import { egressProxy } from './lambda-egress.mjs'
import { gone, groupStates, members, signalGroup, spawnGroup, stopped, threadStates } from './group.mjs'

const RUNNER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const TMP = process.env.HEADWATER_RUNNER_TMP || '/tmp' // set by tests only
const CHILD_TMP = path.join(TMP, 'runner')
const EGRESS = path.join(TMP, 'egress') // the children's egress directories (lambda-egress.mjs)
const BUNDLES = path.join(TMP, 'bundles')
const BUNDLE_TIMEOUT_MS = 90_000
const HASH = /^[0-9a-f]{64}$/
const BUNDLER_TENANT = 'bundler' // the bundle op's tenant (lambda_runner.py BUNDLER_TENANT): no component code runs as it
const GRACE_MS = Number(process.env.HEADWATER_RUNNER_GRACE_MS) || 10_000 // past a call's own limit; set by tests only
const STOP_WAIT_MS = 5_000 // a child whose threads are not all stopped by then is killed
const NAP_MS = 0.05 // between looks at the stopping child
const RUNTIME_API = process.env.AWS_LAMBDA_RUNTIME_API || '' // host:port, on loopback
const LAUNCHER = path.join(RUNNER_DIR, 'launcher', 'launcher') // the seccomp launcher (launcher.c)
const LAUNCHER_FAILED = 125 // its exit code when the filter could not be installed
// This process made non-dumpable (launcher/undumpable.c), so that the child, the same user, cannot
// read its memory or environment through /proc; null when that worked, else why it did not.
const UNDUMPABLE = undumpable(path.join(RUNNER_DIR, 'launcher', 'undumpable.node'))
// Test-only: the child without the launcher, with the network Lambda gives (never set in template.yaml).
const UNCONFINED = process.env.HEADWATER_RUNNER_UNSAFE_NO_LAUNCHER === '1'
const EGRESS_POLICY = {
  allowPrivate: ['1', 'true', 'yes', 'on'].includes((process.env.HEADWATER_ALLOW_PRIVATE_URLS || '').toLowerCase()),
  // Test-only: loopback ports component code may reach (loopback is refused on Lambda; never set in template.yaml).
  loopbackPorts: new Set((process.env.HEADWATER_RUNNER_EGRESS_ALLOW_LOOPBACK_PORTS || '').split(',').filter(Boolean).map(Number)),
  runtimeApi: RUNTIME_API,
}

let child = null
let childAccount = null // the one account whose calls this child has served
let tenant = null // the tenant this execution environment serves (its first invocation's), in tenant isolation mode
let nextId = 1
const pending = new Map() // id -> {resolve, partials}

// Killed with its whole process group, stopped or not (SIGKILL ends a stopped process too): the
// next call gets a fresh child.
function kill(proc) {
  if (child === proc) child = null
  signalGroup(proc, 'SIGKILL')
}

function start() {
  // The child's files are /tmp/runner only: the bundles and npm store this process keeps in /tmp
  // (served to other accounts' runs) are out of component code's reach.
  fs.mkdirSync(CHILD_TMP, { recursive: true })
  const args = [
    '--permission', '--allow-worker', `--allow-fs-read=${RUNNER_DIR}`, `--allow-fs-read=${CHILD_TMP}`,
    `--allow-fs-write=${CHILD_TMP}`, '--disable-warning=SecurityWarning', path.join(RUNNER_DIR, 'src', 'stdio.mjs'),
  ]
  // Through the seccomp launcher: no socket but AF_UNIX, no io_uring (libuv is told so too); its
  // connections go through its egress proxy, here, whose directory is outside its /tmp/runner.
  // A process group of its own (group.mjs), so that it is stopped and killed with all it forks.
  let proc
  if (UNCONFINED) proc = spawnGroup(process.execPath, args, { env: {}, cwd: CHILD_TMP, stdio: ['pipe', 'pipe', 'inherit'] })
  else {
    const egress = egressProxy(EGRESS, EGRESS_POLICY)
    const env = { UV_USE_IO_URING: '0', HEADWATER_EGRESS_DIR: egress.dir }
    proc = spawnGroup(LAUNCHER, [process.execPath, ...args], { env, cwd: CHILD_TMP, stdio: ['pipe', 'pipe', 'inherit'] })
    proc.egress = egress
  }
  proc.stdioLinks = new Set()
  for (const fd of [0, 1, 2]) {
    try {
      proc.stdioLinks.add(fs.readlinkSync(`/proc/${proc.pid}/fd/${fd}`))
    } catch {}
  }
  createInterface({ input: proc.stdout, crlfDelay: Infinity }).on('line', (line) => {
    // Trust ends at the child: a line that is not an answer to a call in flight is the child
    // failing (its calls end RUNNER_CRASHED when it exits).
    let message
    try {
      message = JSON.parse(line)
    } catch {
      kill(proc)
      return
    }
    const call = message && typeof message === 'object' ? pending.get(message.id) : undefined
    if (!call) {
      kill(proc)
      return
    }
    if (message.partial) call.partials.push(message)
    else {
      pending.delete(message.id)
      clearTimeout(call.timer)
      if ([...pending.values()].some((c) => c.proc === proc)) return call.resolve(message)
      call.resolve(pause(proc) ? message : { id: message.id, ok: false, error: { code: 'RUNNER_CRASHED', message: 'the runner process held a connection to the Lambda runtime API: it was killed' } })
    }
  })
  proc.on('exit', (code, signal) => {
    if (child === proc) child = null
    signalGroup(proc, 'SIGKILL') // what it forked dies with it
    proc.egress?.close()
    const message = code === LAUNCHER_FAILED
      ? `the runner's seccomp launcher could not confine the runner process (see the function's log): component code is not run without it`
      : `runner process exited with ${signal || code}`
    for (const [id, call] of pending) {
      if (call.proc !== proc) continue // a call of the child that replaced this one
      pending.delete(id)
      clearTimeout(call.timer)
      call.resolve({ id, ok: false, error: { code: 'RUNNER_CRASHED', message } })
    }
  })
  proc.on('error', () => {}) // not started (the launcher went missing): its exit answers the calls
  proc.stdin.on('error', () => {}) // a dead child: its exit answers the calls
  return proc
}

// A stopped child would outlive this process (it cannot see its stdin close): it ends with it, with
// all it forked.
process.on('exit', () => {
  if (child) signalGroup(child, 'SIGKILL')
})

// ---- the child between calls: stopped ----------------------------------------------------------

// Stops the child's process group and returns once every thread of every process in it is stopped
// (or dead), so that none of its code runs once this invocation is answered. False when one of them
// held a connection to the runtime API: the group is killed then.
function pause(proc) {
  signalGroup(proc, 'SIGSTOP')
  proc.stopped = true
  const until = Date.now() + STOP_WAIT_MS
  const nap = new Int32Array(new SharedArrayBuffer(4))
  for (;;) {
    if (stopped(groupStates(proc.pid))) break
    if (Date.now() > until) {
      kill(proc)
      return true // its exit ends nothing (no call in flight); the next call starts a child
    }
    // The threads stop when next scheduled: leave them the CPU meanwhile (Lambda's share of one is small).
    Atomics.wait(nap, 0, 0, NAP_MS)
  }
  const holder = RUNTIME_API ? [proc.pid, ...members(proc.pid)].find((pid) => holdsApiConnection(pid, proc.stdioLinks)) : undefined
  if (holder !== undefined) {
    kill(proc)
    console.error(`runner: the child's process group (pid ${holder} of ${proc.pid}) held a connection to the runtime API ${RUNTIME_API}: killed`)
    return false
  }
  return true
}

// IPv4 `a.b.c.d` as /proc/net/tcp writes it (the address in host byte order, little-endian here).
function procAddress(host) {
  const parts = host.split('.').map(Number)
  if (parts.length !== 4 || parts.some((n) => !(n >= 0 && n <= 255))) return null
  return parts.reverse().map((n) => n.toString(16).padStart(2, '0')).join('').toUpperCase()
}

// Whether the (stopped) process has a socket connected to the runtime API open: a request it could
// be answered on later (an invocation's event, while the parent waits for /next).
// `stdio`: its stdio as it was started (socket pairs), so the tables are read only for more.
function holdsApiConnection(pid, stdio) {
  const sockets = new Set()
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
        const m = /^socket:\[(\d+)\]$/.exec(link)
        if (m && !stdio.has(link)) sockets.add(m[1])
      } catch {}
    }
  } catch {
    return false // gone
  }
  if (!sockets.size) return false
  const i = RUNTIME_API.lastIndexOf(':')
  const host = procAddress(RUNTIME_API.slice(0, i))
  const port = Number(RUNTIME_API.slice(i + 1)).toString(16).toUpperCase().padStart(4, '0')
  const remotes = host ? [`${host}:${port}`, `0000000000000000FFFF0000${host}:${port}`] : []
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let lines = []
    try {
      lines = fs.readFileSync(table, 'latin1').split('\n').slice(1)
    } catch {}
    for (const line of lines) {
      const f = line.trim().split(/\s+/)
      if (f.length > 9 && sockets.has(f[9]) && (remotes.includes(f[2]) || (!host && f[2].endsWith(`:${port}`)))) return true
    }
  }
  return false
}

// A stopped child is resumed (its process group) for its next call; one that died while stopped is
// replaced (what it forked is killed with it).
function resume(proc) {
  if (!proc.stopped) return true
  if (gone(threadStates(proc.pid))) return false
  proc.stopped = false
  signalGroup(proc, 'SIGCONT')
  return true
}

function undumpable(module) {
  try {
    process.dlopen({ exports: {} }, module)
    return null
  } catch (e) {
    return e.message
  }
}

function launcherReady() {
  try {
    fs.accessSync(LAUNCHER, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

function limitMs(event) {
  const own = Number.isFinite(event.timeout_ms) && event.timeout_ms > 0 ? event.timeout_ms : 30_000
  return own * Math.max(1, Array.isArray(event.events) ? event.events.length : 1) + GRACE_MS
}

// No child serves two accounts: an invocation for another account than the warm child's gets a
// fresh child and an empty /tmp/runner (a cold start, the price of not sharing one).
async function ask(event, partials) {
  const account = typeof event.account === 'string' ? event.account : ''
  if (child && (childAccount !== account || !resume(child))) kill(child)
  if (!child) {
    if (!UNCONFINED && !launcherReady()) {
      return { id: null, ok: false, error: { code: 'RUNNER_CRASHED', message: `the runner's seccomp launcher ${LAUNCHER} is missing: component code is not run without it` } }
    }
    if (!UNCONFINED && UNDUMPABLE) {
      return { id: null, ok: false, error: { code: 'RUNNER_CRASHED', message: `the runner could not make its own process non-dumpable (${UNDUMPABLE}): component code is not run without it` } }
    }
    // /tmp/runner is emptied for a new account whether its last child is alive or was killed.
    if (childAccount !== account) fs.rmSync(CHILD_TMP, { recursive: true, force: true })
    child = start()
    childAccount = account
  }
  const id = nextId++
  const proc = child
  await proc.egress?.ready
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      if (!pending.delete(id)) return
      kill(proc)
      resolve({ id, ok: false, error: { code: 'TIMEOUT', message: `the runner did not answer within ${limitMs(event)} ms: it was killed` } })
    }, limitMs(event))
    pending.set(id, { resolve, partials, proc, timer })
    proc.stdin.write(JSON.stringify({ ...event, id }) + '\n')
  })
}

// ---- the bundle bucket, through the request's presigned URLs only ------------------------------
async function urlGet(url) {
  const r = await fetch(url)
  if (r.status === 403 || r.status === 404) return null // gone, or the URL expired
  if (!r.ok) throw new Error(`bundle bucket GET: HTTP ${r.status}`)
  return await r.text()
}

async function urlPut(url, body, contentType) {
  const r = await fetch(url, { method: 'PUT', body, headers: { 'content-type': contentType } })
  if (!r.ok) throw new Error(`bundle bucket PUT: HTTP ${r.status}`)
}

const local = (hash, ext) => path.join(BUNDLES, `${hash}.${ext}`)

function readLocal(hash, ext) {
  try {
    return fs.readFileSync(local(hash, ext), 'utf8')
  } catch {
    return null
  }
}

function writeLocal(hash, ext, text) {
  fs.mkdirSync(BUNDLES, { recursive: true })
  const tmp = `${local(hash, ext)}.tmp-${process.pid}`
  fs.writeFileSync(tmp, text)
  fs.renameSync(tmp, local(hash, ext))
}

const sha256 = (text) => createHash('sha256').update(text).digest('hex')

class Corrupt extends Error {}

// A bundle's code by the SHA-256 of its content (`name`): this container's /tmp, else the bucket
// through the request's URL (kept in /tmp then). Whatever is read is loaded only if it hashes to its
// name: a file in /tmp that does not is removed, a bucket object that does not is refused (Corrupt).
// Without a name to check it against, nothing is read: the caller is told BUNDLE_MISSING.
async function bundleCode(name, url) {
  if (typeof name !== 'string' || !HASH.test(name)) return null
  const held = readLocal(name, 'cjs')
  if (held !== null && sha256(held) === name) return held
  if (held !== null) {
    fs.rmSync(local(name, 'cjs'), { force: true })
    console.error(`runner: /tmp/bundles/${name}.cjs did not hash to its name: removed`)
  }
  if (typeof url !== 'string') return null
  const code = await urlGet(url)
  if (code === null) return null
  if (sha256(code) !== name) throw new Corrupt(`the bundle fetched from the bundle bucket does not hash to its name ${name}: it was changed after it was made, and is not run`)
  writeLocal(name, 'cjs', code)
  return code
}

function runBundler(request) {
  return new Promise((resolve) => {
    // a group of its own: npm and esbuild, which it starts, are killed with it
    const proc = spawnGroup(process.execPath, [path.join(RUNNER_DIR, 'src', 'bundle.mjs')], {
      env: { PATH: '/usr/bin:/bin', HOME: TMP, TMPDIR: TMP }, cwd: RUNNER_DIR, stdio: ['pipe', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    const timer = setTimeout(() => signalGroup(proc, 'SIGKILL'), BUNDLE_TIMEOUT_MS)
    proc.stdout.on('data', (d) => (out += d))
    proc.stderr.on('data', (d) => (err += d))
    proc.on('error', (e) => (err += String(e)))
    proc.on('close', (code, signal) => {
      clearTimeout(timer)
      const last = out.trim().split('\n').pop()
      try {
        resolve(JSON.parse(last))
      } catch {
        const why = signal === 'SIGKILL' ? `bundling took longer than ${BUNDLE_TIMEOUT_MS / 1000} s` : err.trim().slice(-500) || `exit ${code}`
        resolve({ ok: false, code: signal === 'SIGKILL' ? 'TIMEOUT' : 'BUNDLER_FAILED', message: why })
      }
    })
    proc.stdin.on('error', () => {})
    proc.stdin.end(JSON.stringify(request))
  })
}

// The bundle op: the bundle kept in /tmp/bundles by its content's hash (`<sha256>.cjs`), and
// `<hash of the code>.json` ({packages, sha256}) pointing at it.
function madeBefore(hash) {
  try {
    const meta = JSON.parse(readLocal(hash, 'json'))
    const bundled = HASH.test(meta.sha256) ? readLocal(meta.sha256, 'cjs') : null
    return bundled !== null && sha256(bundled) === meta.sha256 ? { meta, bundled } : null
  } catch {
    return null
  }
}

async function bundleOp(event) {
  const { code, lock, put } = event
  if (typeof code !== 'string') return { ok: false, error: { code: 'BAD_REQUEST', message: 'the bundle op needs code' } }
  const hash = sha256(code)
  // Made before in this container: the pair from /tmp (the caller asks only when the bucket has not
  // got it, so it is put there again); a pair missing its bundle, or one not hashing to its name, is made again.
  let made = madeBefore(hash)
  if (made === null) {
    const out = path.join(TMP, `bundle-${hash}.cjs`)
    const r = await runBundler({
      entry_code: code, out, store: path.join(TMP, 'npm-store'), npm_cache: path.join(TMP, 'npm-cache'),
      lock: lock && typeof lock === 'object' ? lock : {},
    })
    if (!r.ok) {
      const failed = ['TIMEOUT', 'BUNDLER_FAILED'].includes(r.code) ? r.code : 'BUNDLE_FAILED'
      return { ok: false, error: { code: failed, message: r.message || 'the component could not be bundled' } }
    }
    const bundled = fs.readFileSync(out, 'utf8')
    fs.rmSync(out, { force: true })
    made = { meta: { packages: r.packages || {}, sha256: sha256(bundled) }, bundled }
    writeLocal(made.meta.sha256, 'cjs', bundled)
  }
  const meta = JSON.stringify({ packages: made.meta.packages || {}, sha256: made.meta.sha256 })
  writeLocal(hash, 'json', meta)
  if (put && typeof put.cjs === 'string' && typeof put.json === 'string') {
    await urlPut(put.cjs, made.bundled, 'application/javascript')
    await urlPut(put.json, meta, 'application/json')
  }
  return { ok: true, result: { hash, packages: made.meta.packages || {}, sha256: made.meta.sha256 } }
}

// Why this invocation is refused, or null (tenant isolation: see the top of this file). The
// environment keeps the tenant of its first invocation that names one.
function admit(event, context) {
  const id = context && typeof context.tenantId === 'string' && context.tenantId !== '' ? context.tenantId : null
  if (id === null) return tenant === null ? null : `this execution environment serves tenant ${tenant}: an invocation without a tenant is refused`
  if (tenant === null) tenant = id
  if (id !== tenant) return `this execution environment serves tenant ${tenant}: tenant ${id}'s invocation is refused`
  if (event?.op === 'bundle') return id === BUNDLER_TENANT ? null : `the bundle op runs as the tenant ${BUNDLER_TENANT} only`
  if (id === BUNDLER_TENANT) return `no component code runs as the tenant ${BUNDLER_TENANT}`
  if (event?.account !== id) return `this invocation is tenant ${id}'s: a request of account ${event?.account} is refused`
  return null
}

async function answer(event, partials, context) {
  const refused = admit(event, context)
  if (refused !== null) return { ok: false, error: { code: 'TENANT_REFUSED', message: refused } }
  if (event?.op === 'bundle') return bundleOp(event)
  const b = event?.bundle
  // The presigned URL stays in this process: component code gets the bundle, never a URL.
  if (b && typeof b === 'object') event = { ...event, bundle: typeof b.code === 'string' ? { hash: b.hash, code: b.code } : { hash: b.hash } }
  let res = await ask(event, partials)
  if (!res.ok && res.error?.code === 'BUNDLE_MISSING' && b && typeof b.hash === 'string' && typeof b.code !== 'string') {
    let code
    try {
      code = await bundleCode(b.sha256, b.url)
    } catch (e) {
      if (!(e instanceof Corrupt)) throw e
      return { ok: false, error: { code: 'BUNDLE_CORRUPT', message: `bundle of code ${b.hash}: ${e.message}` } }
    }
    if (code !== null) {
      partials.length = 0
      res = await ask({ ...event, bundle: { hash: b.hash, code } }, partials)
    }
  }
  return res
}

export const handler = async (event, context) => {
  const partials = []
  let res
  try {
    res = await answer(event, partials, context)
  } catch (e) {
    res = { ok: false, error: { code: 'RUNNER_CRASHED', message: `runner Lambda: ${e instanceof Error ? e.message : String(e)}` } }
  }
  const callerId = event && typeof event === 'object' && !Array.isArray(event) ? event.id ?? null : null
  for (const p of partials) p.id = callerId
  const out = { ...res, id: callerId }
  if (partials.length) out.partials = partials
  return out
}
