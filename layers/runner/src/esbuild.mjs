// The esbuild passes of the bundler (docs/runner-protocol.md, "Bundler"): the scan that lists a
// component's npm imports, the bundle pass that resolves every import into the installed trees
// or the platform module and nowhere else, and the source pass of `mode: "source"`.
import * as esbuild from 'esbuild'
import fs from 'node:fs'
import path from 'node:path'
import { BundleError, RUNNER_DIR, readJSON } from './bundle-common.mjs'
import { builtinName, importRefusal, insideRoots, isBare, isEntry, isPipedream, packageRefusal, parseSpecifier, quoted } from './imports.mjs'
import { executablesError, executablesOf } from './executables.mjs'
import { inside, isNativeLoader, loadsNative, nativeError, nativeVerdict, packageOf } from './natives.mjs'
import { realRequires, staticDirnameRequires } from './rewrites.mjs'
import { inlineMap, linksAFile, withoutMapLinks } from './sourcemaps.mjs'
import { standIn } from './packages.mjs'

const TYPES = path.join(RUNNER_DIR, 'platform', 'types.js')
const PACKAGE_FILE = /[\\/]node_modules[\\/].*\.(?:[cm]?[jt]s|[jt]sx)$/
const loaderOf = (file) => (/\.[cm]?ts$/.test(file) ? 'ts' : /\.tsx$/.test(file) ? 'tsx' : /\.jsx$/.test(file) ? 'jsx' : 'js')

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

// Pass 1: parse the entry (trying JS, then TypeScript) and list the npm packages it imports,
// and whether the entry is an ES module (then it gets Node's interop: see `entryName`).
export async function scan(stdin) {
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

function realOr(p) {
  try {
    return fs.realpathSync(p)
  } catch {
    return p
  }
}

// The file an import resolves to, or null.
async function resolvedFile(build, spec, args) {
  const r = await build.resolve(spec, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: { inner: true } })
  return !r.errors.length && r.namespace === 'file' && !r.external ? r.path : null
}

// A bundle with top-level await (a dependency's, as ky-universal has) cannot be CommonJS: it is
// built as ESM and run as the body of an async function (worker.mjs). Its externals (builtins, the
// platform, left-out packages) are reached through small CommonJS modules that `require` them, so
// the output has no `import` statement left, and its exports are returned.
const TOP_LEVEL_AWAIT = 'Top-level await is currently not supported with the "cjs" output format'
const EXTERNAL_NS = 'hw-external'
const SHARED_NS = 'hw-package' // a stand-in of a package the store holds (packages.mjs)
const STAND_IN_SUFFIX = '#stand-in'
// The imports a store entry stands in for; `require.resolve` and the like are left as they were.
const SHAREABLE_KINDS = new Set(['import-statement', 'require-call', 'dynamic-import'])
export const ASYNC_MARK = '/* headwater: top-level await */'

function requiredExternals(build) {
  build.onResolve({ filter: /.*/, namespace: EXTERNAL_NS }, (args) => ({ path: args.path, external: true }))
  build.onLoad({ filter: /.*/, namespace: EXTERNAL_NS }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)})`, loader: 'js' }))
  return (resolve) => async (args) => {
    const r = await resolve(args)
    return r && r.external ? { path: r.path, namespace: EXTERNAL_NS } : r
  }
}

// The ESM output as the body of an async function: its closing `export { a as default, b }`
// made a return of the same names (flagged as an ES module's exports, as CommonJS output is).
function asyncBody(text) {
  // the legal comments esbuild puts at the end (`/*! Bundled license information: ...`) may follow
  const m = /\nexport \{([^}]*)\};?(?:\s|\/\*[\s\S]*?\*\/)*$/.exec(text)
  const names = m ? m[1].split(',').map((x) => x.trim()).filter(Boolean).map((x) => {
    const [local, exported = local] = x.split(/\s+as\s+/)
    return `${JSON.stringify(exported.replace(/^"|"$/g, ''))}: ${local}`
  }) : []
  const body = m ? text.slice(0, m.index) : text
  return `${ASYNC_MARK}${body}\nreturn { __esModule: true, ${names.join(', ')} };\n`
}

// Pass 2: the real bundle. Every import is resolved here and must land in the component's
// packages' trees or the runner's platform module (and its packages), nowhere else. Native loads
// of packages and imports of left-out packages (`seen.leftOut`, natives.mjs) stay external: the
// runner's `require` throws MODULE_NOT_FOUND for them; `seen` gathers them and package imports.
// `share` (the package store's: packages.mjs) makes the component's own npm imports stand-ins of
// the store's bundles instead of their code (`sharedImport`).
function resolvePlugin(trees, stdin, seen, mapped, asyncModule, share = null) {
  const single = Boolean(stdin.single)
  const ownDir = stdin.resolveDir
  const platformDir = path.join(RUNNER_DIR, 'platform')
  const own = single || stdin.packageEntry ? [] : [ownDir] // an entry_file's neighbours (the operator's files)
  const roots = [...[...trees.values()].map((d) => path.join(d, 'node_modules')), platformDir, path.join(RUNNER_DIR, 'node_modules'), ...own].map(realOr)
  const inUserCode = (importer) => importer === '' || importer === '<stdin>' || !importer.split(path.sep).includes('node_modules')
  return {
    name: 'headwater',
    setup(build) {
      const onResolve = asyncModule ? requiredExternals(build) : (f) => f
      if (share) {
        build.onResolve({ filter: /.*/, namespace: SHARED_NS }, (args) => (asyncModule ? { path: args.path, namespace: EXTERNAL_NS } : { path: args.path, external: true }))
        build.onLoad({ filter: /.*/, namespace: SHARED_NS }, (args) => ({ contents: standIn(args.path.slice(0, -STAND_IN_SUFFIX.length), args.pluginData.format), loader: 'js' }))
      }
      build.onResolve({ filter: /.*/ }, onResolve(async (args) => {
        if (args.kind === 'entry-point' || (args.pluginData && args.pluginData.inner)) return undefined
        const s = args.path
        if (builtinName(s)) return { path: s, external: true }
        const refused = importRefusal(s, single && isEntry(args.importer, stdin))
        if (refused) return { errors: [{ text: refused }] }
        const p = isBare(s) ? parseSpecifier(s) : null
        // a native load, by a package or by the component itself, is judged by natives.mjs; a
        // `.node` import is one only if it does not resolve to a JavaScript file
        if (isNativeLoader(s) || (/\.node$/i.test(s) && loadsNative(s, await resolvedFile(build, s, args)))) {
          seen.natives.push({ importer: args.importer, spec: s })
          return { path: s, external: true }
        }
        // the platform is the runner's, required at run time (worker.mjs); its types are bundled
        if (p && isPipedream(p.name)) return p.name === '@pipedream/types' ? { path: TYPES } : { path: '@pipedream/platform', external: true }
        const userPackage = p && inUserCode(args.importer) && !args.importer.startsWith(platformDir)
        const bad = userPackage ? packageRefusal(s) : null
        if (bad) return { errors: [{ text: bad }] }
        const tree = userPackage ? trees.get(p.name) : null
        if (userPackage && !tree) return { errors: [{ text: `import "${s}": package ${p.name} was not installed` }] }
        if (userPackage && share && SHAREABLE_KINDS.has(args.kind)) {
          const shared = await sharedImport(build, share, p, tree, args)
          if (shared) return shared
        }
        const r = await build.resolve(userPackage ? p.name + p.subpath : s, {
          kind: args.kind, importer: args.importer, resolveDir: userPackage ? tree : args.resolveDir, pluginData: { inner: true },
        })
        // unresolved: the component's own import is an error; a package's is left to esbuild, which
        // lets `try { require('optional') } catch {}` pass
        if (r.errors.length) return userPackage ? { errors: r.errors } : undefined
        if (!r.external && r.namespace === 'file' && !insideRoots(r.path, roots)) {
          return { errors: [{ text: `import "${s}" is not allowed: it resolves outside the component's packages` }] }
        }
        if (r.namespace === 'file' && !r.external) {
          const importer = args.importer || '<stdin>'
          if (seen.leftOut.some((root) => inside(r.path, root) && !inside(importer, root))) return { path: s, external: true }
          if (loadsNative(s, r.path)) {
            seen.natives.push({ importer, spec: s })
            return { path: s, external: true }
          }
          if (r.path.split(path.sep).includes('node_modules')) seen.edges.push({ importer, spec: s, path: r.path })
        }
        return { path: r.path, external: r.external, sideEffects: r.sideEffects, namespace: r.namespace }
      }))
      // `require(__dirname + "/file.js")` in a package reads a file next to it, which a bundle
      // has not: made a static `require("./file.js")`, esbuild bundles the file (pg-format).
      // A package's links to map files are made inert (sourcemaps.mjs).
      build.onLoad({ filter: PACKAGE_FILE }, (args) => {
        const text = fs.readFileSync(args.path, 'utf8')
        let fixed = /\.c?js$/.test(args.path) && text.includes('__dirname') ? staticDirnameRequires(text) : text
        if (mapped) fixed = withoutMapLinks(fixed)
        return fixed === text ? undefined : { contents: fixed, loader: loaderOf(args.path), resolveDir: path.dirname(args.path) }
      })
    },
  }
}

// A component's import of `p` as the store's entry (its stand-in module), or null to inline it: an
// import that resolves to a file of the package's tree that loads no addon, whose entry the store
// holds or can (packages.mjs). Its variant: `r` when `import` and `require` resolve to one file.
async function sharedImport(build, share, p, tree, args) {
  const resolve = (kind) => build.resolve(p.name + p.subpath, { kind, importer: args.importer, resolveDir: tree, pluginData: { inner: true } })
  const r = await resolve(args.kind)
  if (r.errors.length || r.external || r.namespace !== 'file' || !insideRoots(r.path, [realOr(path.join(tree, 'node_modules'))])) return null
  if (loadsNative(args.path, r.path)) return null
  let variant = 'r'
  if (args.kind !== 'require-call') {
    const asRequired = await resolve('require-call')
    if (asRequired.errors.length || asRequired.path !== r.path) variant = 'i'
  }
  const entry = await share.entry(p.name, share.versions[p.name], p.subpath, variant, r.path, tree)
  if (!entry) return null
  share.refs.set(entry.id, entry.file)
  for (const program of entry.executables) share.executables.add(program)
  // the stand-in's path must not end as the package's file does: esbuild gives a module whose path
  // ends in `.mjs` Node's interop, where a default import is the whole exports, not their default
  return { path: `${entry.id}${STAND_IN_SUFFIX}`, namespace: SHARED_NS, pluginData: { format: entry.format } }
}

// A store entry's bundle (packages.mjs): the package's entry file as CommonJS with everything it
// imports from its tree, by the rules a component's bundle has (natives, left-out packages,
// rewrites); {text, format of the entry, executables} or null when it cannot stand alone (esbuild
// refuses it, top-level await, an addon loaded on its own path).
export async function bundlePackage(entryFile, tree) {
  const leftOut = []
  const stdin = { single: false, packageEntry: true, resolveDir: tree }
  for (let round = 0; ; round++) {
    const seen = { natives: [], edges: [], leftOut }
    let res
    try {
      res = await esbuild.build({
        entryPoints: [entryFile], bundle: true, write: false, platform: 'node', format: 'cjs', target: 'node22', logLevel: 'silent',
        absWorkingDir: tree, nodePaths: [], plugins: [resolvePlugin(new Map([['', tree]]), stdin, seen, true, false)], metafile: true,
      })
    } catch (e) {
      if (!e.errors) throw e
      return null
    }
    const verdict = await nativeVerdict(seen.natives, seen.edges, { file: entryFile, contents: '' })
    if (verdict.refused) return null
    const more = (verdict.leftOut || []).filter((root) => !leftOut.includes(root))
    if (more.some((root) => inside(entryFile, root))) return null
    if (more.length && round < 4) {
      leftOut.push(...more)
      continue
    }
    const inputs = Object.entries(res.metafile.inputs).map(([f, input]) => [path.resolve(tree, f), input])
    const entry = inputs.find(([f]) => f === entryFile || realOr(f) === realOr(entryFile))
    return {
      text: res.outputFiles[0].text,
      format: entry && entry[1].format === 'esm' ? 'esm' : 'cjs',
      executables: executablesOf('', inputs.map(([f]) => f)),
    }
  }
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

// Pass 2 itself: the entry bundled as CommonJS with its packages' trees, the bundle's text (or a
// LOAD_ERROR, NATIVE_ADDON naming the packages that load compiled code on the component's path,
// or NEEDS_EXECUTABLE naming the programs it runs). Bundled again, at most a few times, while
// natives.mjs finds more optional native packages to leave out.
export async function bundlePass(stdin, loader, esm, trees, share = null) {
  const sourcefile = entryName(stdin.sourcefile, loader, esm)
  const entry = { ...stdin, sourcefile }
  // A map of the bundle (sourcemaps.mjs), unless the code links one by file name.
  const mapped = !linksAFile(stdin.contents)
  const leftOut = []
  let asyncModule = false
  for (let round = 0; ; round++) {
    const seen = { natives: [], edges: [], leftOut }
    let res
    try {
      res = await bundleOnce(entry, loader, trees, seen, mapped, asyncModule, share)
    } catch (e) {
      if (asyncModule || !(e instanceof BundleError) || !e.message.includes(TOP_LEVEL_AWAIT)) throw e
      asyncModule = true
      round--
      continue
    }
    const verdict = await nativeVerdict(seen.natives, seen.edges, { file: path.join(stdin.resolveDir, sourcefile), contents: stdin.contents })
    if (verdict.refused) throw nativeError(verdict.refused)
    const more = (verdict.leftOut || []).filter((root) => !leftOut.includes(root))
    if (more.length && round < 4) {
      leftOut.push(...more)
      continue
    }
    const programs = executablesOf(stdin.contents, Object.keys(res.metafile.inputs).map((f) => path.resolve(stdin.resolveDir, f)))
    if (share) programs.push(...[...share.executables].filter((x) => !programs.includes(x)))
    programs.sort()
    if (programs.length) throw executablesError(programs)
    const js = res.outputFiles.find((f) => !f.path.endsWith('.map'))
    const map = res.outputFiles.find((f) => f.path.endsWith('.map'))
    const text = asyncModule ? asyncBody(js.text) : js.text
    if (!map) return text
    // a code deploy's entry is shown as `component.js` (`component.ts`): it has no file name
    const shown = loader === 'ts' && stdin.single ? 'component.ts' : stdin.sourcefile
    return text + inlineMap(map.text, stdin.resolveDir, realOr(path.join(RUNNER_DIR, 'platform')), { bundled: sourcefile, shown })
  }
}

async function bundleOnce(entry, loader, trees, seen, mapped, asyncModule, share) {
  try {
    return await esbuild.build({
      stdin: { contents: entry.contents, resolveDir: entry.resolveDir, sourcefile: entry.sourcefile, loader },
      bundle: true, write: false, platform: 'node', format: asyncModule ? 'esm' : 'cjs', target: 'node22', logLevel: 'silent',
      absWorkingDir: entry.resolveDir, nodePaths: [], plugins: [resolvePlugin(trees, entry, seen, mapped, asyncModule, share)], metafile: true,
      ...(mapped ? { sourcemap: 'external', sourcesContent: false, outfile: path.join(entry.resolveDir, 'component.js') } : {}),
    })
  } catch (e) {
    if (!e.errors) throw e
    const natives = e.errors.map((x) => /No loader is configured for "\.node" files: (.*)/.exec(x.text)).filter(Boolean)
    if (natives.length) throw nativeError([...new Set(natives.map((m) => (packageOf(m[1]) || { name: m[1] }).name))])
    throw new BundleError('LOAD_ERROR', formatErrors(e.errors))
  }
}

// `mode: "source"`: the entry file with its relative imports inlined, one ESM text.
export async function sourcePass(file) {
  try {
    // its map inline, the files named relative to the entry's folder: the bundle pass maps
    // through it to the operator's files (sourcemaps.mjs)
    const dir = path.dirname(file)
    const res = await esbuild.build({
      entryPoints: [file], bundle: true, write: false, platform: 'node', format: 'esm', target: 'node22',
      logLevel: 'silent', plugins: [sourcePlugin()], absWorkingDir: dir, outfile: path.join(dir, '.headwater-source.mjs'),
      sourcemap: 'inline', sourcesContent: false,
    })
    return realRequires(res.outputFiles[0].text)
  } catch (e) {
    if (!e.errors) throw e
    throw new BundleError('LOAD_ERROR', formatErrors(e.errors))
  }
}
