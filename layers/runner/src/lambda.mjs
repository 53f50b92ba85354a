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
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const RUNNER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const TMP = process.env.HEADWATER_RUNNER_TMP || '/tmp' // set by tests only
const CHILD_TMP = path.join(TMP, 'runner')
const BUNDLES = path.join(TMP, 'bundles')
const BUNDLE_TIMEOUT_MS = 90_000
const HASH = /^[0-9a-f]{64}$/

let child = null
let childAccount = null // the one account whose calls this child has served
let nextId = 1
const pending = new Map() // id -> {resolve, partials}

function start() {
  // The child's files are /tmp/runner only: the bundles and npm store this process keeps in /tmp
  // (served to other accounts' runs) are out of component code's reach.
  fs.mkdirSync(CHILD_TMP, { recursive: true })
  const args = [
    '--permission', '--allow-worker', `--allow-fs-read=${RUNNER_DIR}`, `--allow-fs-read=${CHILD_TMP}`,
    `--allow-fs-write=${CHILD_TMP}`, '--disable-warning=SecurityWarning', path.join(RUNNER_DIR, 'src', 'stdio.mjs'),
  ]
  const proc = spawn(process.execPath, args, { env: {}, cwd: CHILD_TMP, stdio: ['pipe', 'pipe', 'inherit'] })
  createInterface({ input: proc.stdout, crlfDelay: Infinity }).on('line', (line) => {
    // Trust ends at the child: a line that is not an answer to a call in flight is the child
    // failing (its calls end RUNNER_CRASHED when it exits).
    let message
    try {
      message = JSON.parse(line)
    } catch {
      proc.kill('SIGKILL')
      return
    }
    const call = message && typeof message === 'object' ? pending.get(message.id) : undefined
    if (!call) {
      proc.kill('SIGKILL')
      return
    }
    if (message.partial) call.partials.push(message)
    else {
      pending.delete(message.id)
      call.resolve(message)
    }
  })
  proc.on('exit', (code, signal) => {
    if (child === proc) child = null
    for (const [id, call] of pending) {
      if (call.proc !== proc) continue // a call of the child that replaced this one
      pending.delete(id)
      call.resolve({ id, ok: false, error: { code: 'RUNNER_CRASHED', message: `runner process exited with ${signal || code}` } })
    }
  })
  proc.stdin.on('error', () => {}) // a dead child: its exit answers the calls
  return proc
}

// No child serves two accounts: an invocation for another account than the warm child's gets a
// fresh child and an empty /tmp/runner (a cold start, the price of not sharing one).
async function ask(event, partials) {
  const account = typeof event.account === 'string' ? event.account : ''
  if (child && childAccount !== account) {
    const old = child
    child = null
    old.kill('SIGKILL')
    fs.rmSync(CHILD_TMP, { recursive: true, force: true })
  }
  if (!child) {
    child = start()
    childAccount = account
  }
  const id = nextId++
  return new Promise((resolve) => {
    pending.set(id, { resolve, partials, proc: child })
    child.stdin.write(JSON.stringify({ ...event, id }) + '\n')
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

// A bundle's code: this container's /tmp, else the bucket through the request's URL (kept in /tmp then).
async function bundleCode(hash, url) {
  if (!HASH.test(hash)) return null
  const held = readLocal(hash, 'cjs')
  if (held !== null || typeof url !== 'string') return held
  const code = await urlGet(url)
  if (code !== null) writeLocal(hash, 'cjs', code)
  return code
}

function runBundler(request) {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [path.join(RUNNER_DIR, 'src', 'bundle.mjs')], {
      env: { PATH: '/usr/bin:/bin', HOME: TMP, TMPDIR: TMP }, cwd: RUNNER_DIR, stdio: ['pipe', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    const timer = setTimeout(() => proc.kill('SIGKILL'), BUNDLE_TIMEOUT_MS)
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

async function bundleOp(event) {
  const { code, lock, put } = event
  if (typeof code !== 'string') return { ok: false, error: { code: 'BAD_REQUEST', message: 'the bundle op needs code' } }
  const hash = createHash('sha256').update(code).digest('hex')
  // Made before in this container: the pair from /tmp (the caller asks only when the bucket has not
  // got it, so it is put there again); a pair missing its .cjs is made again.
  let meta = readLocal(hash, 'json')
  if (meta !== null && readLocal(hash, 'cjs') === null) meta = null
  if (meta === null) {
    const out = path.join(TMP, `bundle-${hash}.cjs`)
    const r = await runBundler({
      entry_code: code, out, store: path.join(TMP, 'npm-store'), npm_cache: path.join(TMP, 'npm-cache'),
      lock: lock && typeof lock === 'object' ? lock : {},
    })
    if (!r.ok) {
      const failed = ['TIMEOUT', 'BUNDLER_FAILED'].includes(r.code) ? r.code : 'BUNDLE_FAILED'
      return { ok: false, error: { code: failed, message: r.message || 'the component could not be bundled' } }
    }
    meta = JSON.stringify({ packages: r.packages || {} })
    const bundled = fs.readFileSync(out, 'utf8')
    fs.rmSync(out, { force: true })
    writeLocal(hash, 'cjs', bundled)
  }
  writeLocal(hash, 'json', meta)
  if (put && typeof put.cjs === 'string' && typeof put.json === 'string') {
    await urlPut(put.cjs, readLocal(hash, 'cjs'), 'application/javascript')
    await urlPut(put.json, meta, 'application/json')
  }
  return { ok: true, result: { hash, packages: JSON.parse(meta).packages || {} } }
}

async function answer(event, partials) {
  if (event?.op === 'bundle') return bundleOp(event)
  const b = event?.bundle
  // The presigned URL stays in this process: component code gets the bundle, never a URL.
  if (b && typeof b === 'object') event = { ...event, bundle: typeof b.code === 'string' ? { hash: b.hash, code: b.code } : { hash: b.hash } }
  let res = await ask(event, partials)
  if (!res.ok && res.error?.code === 'BUNDLE_MISSING' && b && typeof b.hash === 'string' && typeof b.code !== 'string') {
    const code = await bundleCode(b.hash, b.url)
    if (code !== null) {
      partials.length = 0
      res = await ask({ ...event, bundle: { hash: b.hash, code } }, partials)
    }
  }
  return res
}

export const handler = async (event) => {
  const partials = []
  let res
  try {
    res = await answer(event, partials)
  } catch (e) {
    res = { ok: false, error: { code: 'RUNNER_CRASHED', message: `runner Lambda: ${e instanceof Error ? e.message : String(e)}` } }
  }
  const callerId = event && typeof event === 'object' && !Array.isArray(event) ? event.id ?? null : null
  for (const p of partials) p.id = callerId
  const out = { ...res, id: callerId }
  if (partials.length) out.partials = partials
  return out
}
