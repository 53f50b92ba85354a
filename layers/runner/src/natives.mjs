// Native addons (compiled code), which components cannot load: a bundled file of a package that
// needs one is refused, naming the package.
import fs from 'node:fs'
import path from 'node:path'
import { BundleError, readJSON } from './bundle-common.mjs'

const NATIVE_HELPERS = new Set(['bindings', 'node-gyp-build', 'prebuild-install', 'node-pre-gyp', '@mapbox/node-pre-gyp', 'nan', 'node-addon-api'])

// The package (name, root dir) a bundled file belongs to, from its path under node_modules.
export function packageOf(file) {
  const parts = file.split(path.sep)
  const i = parts.lastIndexOf('node_modules')
  if (i < 0 || i + 1 >= parts.length) return null
  const scoped = parts[i + 1].startsWith('@')
  const name = scoped ? parts.slice(i + 1, i + 3).join('/') : parts[i + 1]
  return { name, root: parts.slice(0, i + 1 + (scoped ? 2 : 1)).join(path.sep) }
}

// A package that needs compiled code (a native addon) cannot run in the runner: refused by name.
export function nativeAddons(inputs, absWorkingDir) {
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

export function nativeError(names) {
  const list = names.map((n) => `"${n}"`).join(', ')
  return new BundleError('NATIVE_ADDON', `npm package ${list} is a native addon (compiled code), which components cannot load: use a pure JavaScript package instead`)
}
