// The reference for bench/registry_try.py's `props` step, taken apart from the service: each
// bundle named on stdin (one path a line) required by Node's own module loader (not the runner's
// worker), `@pipedream/platform` being the runner's module as at run time, and the component's
// `props` resolved here (shorthand strings, propDefinition merged with the prop's own settings).
// Prints one JSON line per bundle: {file, ok, type, props: [{name, type, label}], hooks,
// additional_props} or {file, ok: false, error}. Runs inside a sandbox with no network.
'use strict'
const Module = require('module')
const fs = require('fs')
const path = require('path')

const PLATFORM = process.env.HW_PLATFORM
const STORE = process.env.HW_PACKAGES // the shared package store, read-only
let fileOfId = null // packages.mjs's id -> store file, loaded in main()
const load = Module._load
Module._load = function (request, parent, isMain) {
  if (request === '@pipedream/platform') return load.call(this, PLATFORM, parent, isMain)
  if (typeof request === 'string' && request.startsWith('hw-package:')) {
    const rel = fileOfId && fileOfId(request)
    if (!rel) throw new Error(`not a package id: ${request}`)
    return load.call(this, path.join(STORE, rel), parent, isMain)
  }
  return load.call(this, request, parent, isMain)
}

function component(exp) {
  if (exp && exp.__esModule && 'default' in exp) return exp.default
  if (exp && exp.default && typeof exp.default === 'object' && !('name' in exp) && !('props' in exp)) return exp.default
  return exp
}

function resolve(name, p) {
  if (typeof p === 'string') return { name, type: p, label: null }
  let def = p || {}
  if (Array.isArray(def.propDefinition)) {
    const [app, defName] = def.propDefinition
    const { propDefinition, ...own } = def
    def = { ...((app && app.propDefinitions && app.propDefinitions[defName]) || {}), ...own }
  }
  return { name, type: def.type ?? null, label: def.label ?? null }
}

async function one(file) {
  let code = fs.readFileSync(file, 'utf8')
  const asyncBundle = code.startsWith('/* headwater: top-level await */')
  const mod = new Module(file, null)
  mod.filename = file
  mod.paths = []
  let exports
  if (asyncBundle) {
    const fn = new Function('exports', 'require', 'module', '__filename', '__dirname',
      `return (async () => {${code}\n})()`)
    exports = await fn.call(mod.exports, mod.exports, (id) => mod.require(id), mod, file, path.dirname(file))
  } else {
    mod._compile(code, file)
    exports = mod.exports
  }
  const c = component(exports)
  const props = c && c.props && typeof c.props === 'object' ? c.props : {}
  return {
    ok: true,
    type: (c && c.type) || 'source',
    props: Object.keys(props).map((n) => resolve(n, props[n])),
    hooks: ['deploy', 'activate', 'deactivate'].filter((h) => c && c.hooks && typeof c.hooks[h] === 'function'),
    additional_props: typeof (c && c.additionalProps) === 'function',
  }
}

async function main() {
  fileOfId = (await import(process.env.HW_PACKAGES_MJS)).fileOfId
  const files = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean)
  for (const file of files) {
    let out
    try {
      out = await one(file)
    } catch (e) {
      out = { ok: false, error: `${(e && e.name) || 'Error'}: ${(e && e.message) || String(e)}` }
    }
    process.stdout.write(JSON.stringify({ file: path.basename(file), ...out }) + '\n')
  }
  process.exit(0)
}
main()
