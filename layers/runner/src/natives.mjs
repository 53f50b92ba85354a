// Native addons (compiled code), which components cannot load, handled as Node handles a missing
// one: only a load on the component's path counts. A package's `require` of a native loader
// (`bindings`, `node-gyp-build`...) or of a `.node` file is left out of the bundle (at run time it
// throws MODULE_NOT_FOUND, as the runner's `require` does for anything not a builtin). If the
// package makes it inside a try/catch, the package runs without its addon (ssh2's optional
// `cpu-features`, bufferutil's JS fallback); if not, the package loading it is left out in turn
// when every package requiring it does so inside a try/catch, and otherwise the component is
// refused, naming the package. A package that only lists a native helper among its dependencies
// and never requires it (salesforce-webhooks and `bindings`) is not concerned.
import * as esbuild from 'esbuild'
import fs from 'node:fs'
import path from 'node:path'
import { BundleError, TMP_DIR } from './bundle-common.mjs'
import { parseSpecifier } from './imports.mjs'

// Packages whose one job is to find and load a compiled `.node` file at run time.
const NATIVE_LOADERS = new Set(['bindings', 'node-gyp-build', 'node-gyp-build-optional-packages', 'node-pre-gyp', '@mapbox/node-pre-gyp', 'prebuild-install', 'pkg-prebuilds'])

// The package (name, root dir) a bundled file belongs to, from its path under node_modules.
export function packageOf(file) {
  const parts = file.split(path.sep)
  const i = parts.lastIndexOf('node_modules')
  if (i < 0 || i + 1 >= parts.length) return null
  const scoped = parts[i + 1].startsWith('@')
  const name = scoped ? parts.slice(i + 1, i + 3).join('/') : parts[i + 1]
  return { name, root: parts.slice(0, i + 1 + (scoped ? 2 : 1)).join(path.sep) }
}

export const inside = (file, root) => file === root || file.startsWith(root + path.sep)

// Whether an import loads compiled code: a native loader package, or a `.node` file. `resolved`
// is the file the import resolves to, null when it does not: `./isomorphic.node` may be
// `isomorphic.node.js` (@jsdevtools/ono), which is JavaScript; an addon not built is not there.
export function loadsNative(spec, resolved) {
  if (resolved ? /\.node$/i.test(resolved) : /\.node$/i.test(spec)) return true
  return isNativeLoader(spec)
}

export function isNativeLoader(spec) {
  const p = parseSpecifier(spec)
  return Boolean(p && NATIVE_LOADERS.has(p.name))
}

// Whether `spec` is imported inside a try/catch in the importer's text: esbuild's own rule (an
// import it cannot resolve is an error, unless a try/catch handles it), asked of the importer
// alone with that import made unresolvable.
async function guarded(contents, file, spec) {
  const nowhere = path.join(TMP_DIR, 'hw-no-such-dir', 'x')
  try {
    await esbuild.build({
      stdin: { contents, resolveDir: nowhere, sourcefile: path.basename(file), loader: /\.(c|m)?ts$/.test(file) ? 'ts' : 'js' },
      bundle: true, write: false, platform: 'node', format: 'cjs', target: 'node22', logLevel: 'silent', nodePaths: [],
      plugins: [{
        name: 'guarded',
        setup(build) {
          build.onResolve({ filter: /.*/ }, (args) => (args.path === spec ? undefined : { path: args.path, external: true }))
        },
      }],
    })
    return true
  } catch (e) {
    if (!e.errors) throw e
    return false
  }
}

// The verdict on a bundle's native loads. `natives`: [{importer, spec}] native loads seen;
// `edges`: [{importer, spec, path}] every import of a package file; `entry`: the entry's text.
// -> {refused: [package names]} or {leftOut: [package roots]} (packages to leave out, whose
// importers all handle their absence), or {} when every native load is handled.
export async function nativeVerdict(natives, edges, entry) {
  const memo = new Map()
  const isGuarded = (importer, spec) => {
    const key = `${importer}\0${spec}`
    if (!memo.has(key)) {
      const user = packageOf(importer) === null
      const contents = user && (importer === '<stdin>' || importer === '' || importer === entry.file) ? entry.contents : fs.readFileSync(importer, 'utf8')
      memo.set(key, guarded(contents, importer || entry.file, spec))
    }
    return memo.get(key)
  }
  const refused = new Set()
  const leftOut = new Set()
  const work = []
  for (const n of natives) {
    if (await isGuarded(n.importer, n.spec)) continue
    const pkg = packageOf(n.importer)
    if (pkg) work.push(pkg)
    else refused.add(parseSpecifier(n.spec)?.name || n.spec)
  }
  const seen = new Set()
  while (work.length) {
    const pkg = work.shift()
    if (seen.has(pkg.root)) continue
    seen.add(pkg.root)
    const into = edges.filter((e) => inside(e.path, pkg.root) && !inside(e.importer, pkg.root))
    const unguarded = []
    for (const e of into) if (!(await isGuarded(e.importer, e.spec))) unguarded.push(e)
    if (!unguarded.length) {
      leftOut.add(pkg.root)
      continue
    }
    for (const e of unguarded) {
      const by = packageOf(e.importer)
      if (by) work.push(by)
      else refused.add(pkg.name)
    }
  }
  if (refused.size) return { refused: [...refused].sort() }
  return leftOut.size ? { leftOut: [...leftOut] } : {}
}

export function nativeError(names) {
  const list = names.map((n) => `"${n}"`).join(', ')
  return new BundleError('NATIVE_ADDON', `npm package ${list} loads a native addon (compiled code), which components cannot load: use a pure JavaScript package instead`)
}
