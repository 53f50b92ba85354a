// Bundler CLI (docs/runner-protocol.md, "Bundler"). Reads one JSON request on stdin, prints
// one JSON line on stdout.
//   {"entry_code", "out", "store", "npm_cache", "lock"?} -> CommonJS bundle written to `out`, and
//        `packages` {name: version} as installed (the lock a later bundle of the code passes back)
//   {"entry_file", "mode": "source"}                    -> one ESM source text (relative imports
//        inlined; bare imports carry the range of the nearest package.json: `pkg@^1.2`)
//   {"entry_file", "out", "store", "npm_cache"}         -> like entry_code, from a file
//   {"batch": [{"entry_code", "out", "lock"?}, ...], "store", "npm_cache", ...}
//        -> {"ok": true, "results": [one answer per item, as above]}: many bundles for one
//        process start, one esbuild and one npm proxy (registry publishing)
//   {"entry_files": [...], "mode": "source"}            -> {"ok": true, "results": [...]}
// With "package_store" (a directory), the component's npm imports are bundled once each into that
// store and the bundle references them (packages.mjs); the answer's `shared` lists them, id -> file.
// npm packages live in one shared store, a tree per top-level package and exact version
// (`<store>/<name>@<version>/node_modules/<name>`), so each is downloaded and unpacked once for
// every bundle that uses it; a tree is installed under a temporary name and renamed into place.
// The checks of imports are imports.mjs; npm, its registry and the store npm.mjs (npm's proxy
// npm-proxy.mjs); the esbuild passes esbuild.mjs; native addons natives.mjs, programs executables.mjs.
import fs from 'node:fs'
import path from 'node:path'
import { BundleError, TMP_DIR, writeAtomic } from './bundle-common.mjs'
import { bundlePackage, bundlePass, scan, sourcePass } from './esbuild.mjs'
import { packageStore } from './packages.mjs'
import { install, registryOf } from './npm.mjs'
import { registryProxy } from './npm-proxy.mjs'

async function bundle(req, shared = {}) {
  if (!req.store) throw new BundleError('LOAD_ERROR', 'bad bundler request: needs "store"')
  const store = path.resolve(req.store)
  fs.mkdirSync(store, { recursive: true })
  if (typeof req.entry_code === 'string') {
    // an empty directory of its own to resolve from: a one-file component has no neighbours
    const dir = fs.mkdtempSync(path.join(TMP_DIR, 'hw-entry-'))
    try {
      return await bundleFrom({ contents: req.entry_code, resolveDir: dir, sourcefile: 'component.js', loaders: ['js', 'ts'], single: true }, req, store, shared)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  const file = path.resolve(req.entry_file)
  const ts = /\.(ts|mts|cts)$/.test(file)
  return bundleFrom({ contents: fs.readFileSync(file, 'utf8'), resolveDir: path.dirname(file), sourcefile: path.basename(file), loaders: ts ? ['ts'] : ['js', 'ts'] }, req, store, shared)
}

// `shared`: what the bundles of one batch share (npm's proxy, started once when npm is needed).
async function bundleFrom(stdin, req, store, shared) {
  const { loader, packages, esm } = await scan(stdin)
  const ctx = { cache: req.npm_cache, registry: registryOf(req), proxy: null }
  if (packages.size) {
    shared.proxy = shared.proxy || registryProxy(ctx.registry, typeof req.egress === 'string' ? req.egress : null)
    ctx.proxy = await shared.proxy
  }
  const { trees, versions } = await install(packages, store, ctx, req.lock)
  let share = null
  if (typeof req.package_store === 'string') {
    shared.store = shared.store || packageStore(path.resolve(req.package_store), bundlePackage)
    share = { entry: shared.store, versions, refs: new Map(), executables: new Set() }
  }
  const code = await bundlePass(stdin, loader, esm, trees, share)
  if (!req.out) throw new BundleError('LOAD_ERROR', 'request has no "out" file')
  writeAtomic(req.out, code)
  const answer = { ok: true, out: req.out, packages: versions }
  return share ? { ...answer, shared: Object.fromEntries([...share.refs].sort(([a], [b]) => a.localeCompare(b))) } : answer
}

async function source(req) {
  return { ok: true, code: await sourcePass(path.resolve(req.entry_file)) }
}

// One answer per item, a failure of one item being its own answer only.
async function each(items, fn) {
  const results = []
  for (const item of items) {
    try {
      results.push(await fn(item))
    } catch (e) {
      results.push(failure(e))
    }
  }
  return { ok: true, results }
}

const KEYS_OF_ITEM = ['entry_code', 'out', 'lock']

async function batch(req) {
  if (!Array.isArray(req.batch)) throw new BundleError('LOAD_ERROR', 'bad bundler request: "batch" must be a list')
  const shared = {}
  const common = Object.fromEntries(Object.entries(req).filter(([k]) => k !== 'batch' && !KEYS_OF_ITEM.includes(k)))
  return each(req.batch, (item) => {
    if (!item || typeof item.entry_code !== 'string') throw new BundleError('LOAD_ERROR', 'bad bundler request: a batch item needs entry_code')
    return bundle({ ...common, entry_code: item.entry_code, out: item.out, lock: item.lock }, shared)
  })
}

function failure(e) {
  const code = e instanceof BundleError ? e.code : 'LOAD_ERROR'
  return { ok: false, code, message: e instanceof Error ? e.message : String(e) }
}

async function main() {
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  let req
  try {
    req = JSON.parse(input)
  } catch (e) {
    throw new BundleError('LOAD_ERROR', `bad bundler request: ${e.message}`)
  }
  if (typeof req.entry_file === 'string' && req.mode === 'source') return source(req)
  if (Array.isArray(req.entry_files) && req.mode === 'source') return each(req.entry_files, (f) => source({ entry_file: String(f) }))
  if (req.batch !== undefined) return batch(req)
  if (typeof req.entry_code !== 'string' && typeof req.entry_file !== 'string') {
    throw new BundleError('LOAD_ERROR', 'bad bundler request: needs entry_code or entry_file')
  }
  return bundle(req)
}

main().then(
  (r) => {
    process.stdout.write(JSON.stringify(r) + '\n')
  },
  (e) => {
    process.stdout.write(JSON.stringify(failure(e)) + '\n')
    process.exitCode = 1
  },
)
