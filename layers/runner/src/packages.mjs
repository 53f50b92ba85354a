// The shared package store (docs/runner-protocol.md, "Shared packages"): an npm import of a
// component, `name@version/subpath`, bundled once into `<store>/<name>@<version>/<v>_<subpath>.cjs`
// (its own dependencies inlined, from its tree in the npm store) and never rewritten; component
// bundles reference it as `hw-package:<name>@<version><subpath>` (`?import` when the import
// condition resolves to another file than require's), which the runner resolves in the store
// (worker.mjs, `packageModule`). The rules of ids and file names are here, and the runner checks
// ids by the same ones. A package that cannot stand alone as a CommonJS bundle (top-level await,
// a native addon on its own path, anything esbuild or natives.mjs refuses) is inlined into the
// component as before: whatever it does then is decided as it always was.
import fs from 'node:fs'
import path from 'node:path'

export const SCHEME = 'hw-package:'
const HEADER = '/* hw-package '
const NAME = String.raw`(?:@[a-z0-9][a-z0-9._-]*\/)?[A-Za-z0-9][A-Za-z0-9._-]*`
const VERSION = String.raw`\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?`
const SEGMENT = String.raw`[A-Za-z0-9._~@+=,$!-]+`
// hw-package:<name>@<exact version>[/<subpath>][?import]
const ID = new RegExp(String.raw`^${SCHEME}(${NAME})@(${VERSION})((?:\/${SEGMENT})*\/?)(\?import)?$`)

export const storeName = (name, version) => `${name.replace('/', '+')}@${version}`

// An id -> its file relative to the store, or null when it is not a well-formed id (no `.`/`..`
// segment, a name of at most 214 characters).
export function fileOfId(id) {
  const m = typeof id === 'string' ? ID.exec(id) : null
  if (!m || m[1].length > 214 || m[3].split('/').some((s) => s === '.' || s === '..')) return null
  return fileOf(m[1], m[2], m[3], m[4] ? 'i' : 'r')
}

// `r_`: the entry as `require` resolves it; `i_`: as `import` does, when that is another file.
// The subpath is one encoded file name: no `/`, so a file never sits below another's name.
export const fileOf = (name, version, subpath, variant) =>
  `${storeName(name, version)}/${variant}_${encodeURIComponent(subpath.replace(/^\//, ''))}.cjs`

export const idOf = (name, version, subpath, variant) => `${SCHEME}${name}@${version}${subpath}${variant === 'i' ? '?import' : ''}`

// What a component's bundle has in place of the package: a module of its own that requires the
// store's bundle. A CommonJS package's is CommonJS (a default import from an ES module is then its
// module.exports, as when it was inlined); an ES module package's re-exports it (no Node interop:
// its default is its default).
export function standIn(id, format) {
  const q = JSON.stringify(id)
  return format === 'esm' ? `export * from ${q};\nexport { default } from ${q};\n` : `module.exports = require(${q});\n`
}

// The runner's side: an id's file in the store `root` -> {name (as stacks show it), text}, or null
// when the id is not well-formed, there is no store, or the file is not a regular file inside the
// store once every link is followed.
export function packageFile(root, id) {
  const rel = typeof root === 'string' && root !== '' ? fileOfId(id) : null
  if (rel === null) return null
  try {
    const realRoot = fs.realpathSync(root)
    const real = fs.realpathSync(path.join(realRoot, rel))
    if (!real.startsWith(realRoot + path.sep) || !fs.statSync(real).isFile()) return null
    return { name: `node_modules/${rel}`, text: fs.readFileSync(real, 'utf8') }
  } catch {
    return null
  }
}

function readHeader(file) {
  let fd
  try {
    fd = fs.openSync(file, 'r')
    const buf = Buffer.alloc(4096)
    const n = fs.readSync(fd, buf, 0, buf.length, 0)
    const line = buf.subarray(0, n).toString('utf8').split('\n', 1)[0]
    if (!line.startsWith(HEADER) || !line.endsWith(' */')) return null
    return JSON.parse(line.slice(HEADER.length, -3))
  } catch {
    return null
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

// Writes `text` as `file` unless it is there: a store file, once there, is never replaced.
function createOnce(file, text) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const tmp = `${file}.tmp-${process.pid}-${Date.now()}`
  fs.writeFileSync(tmp, text, { mode: 0o444 })
  try {
    fs.linkSync(tmp, file)
  } catch (e) {
    if (e.code !== 'EEXIST') throw e
  } finally {
    fs.rmSync(tmp, { force: true })
  }
}

// The store's entry for one import: {id, file, format, executables}, or null (inline it). `build`
// bundles the entry file as CommonJS: -> {text, format, executables} or null.
export function packageStore(root, build) {
  const memo = new Map()
  return async function entry(name, version, subpath, variant, entryFile, tree) {
    const rel = fileOf(name, version, subpath, variant)
    if (!memo.has(rel)) {
      memo.set(rel, (async () => {
        const file = path.join(root, rel)
        let meta = fs.existsSync(file) ? readHeader(file) : null
        if (!meta) {
          const made = await build(entryFile, tree)
          if (!made) return null
          meta = { format: made.format, executables: made.executables }
          createOnce(file, `${HEADER}${JSON.stringify(meta)} */\n${made.text}`)
          meta = readHeader(file) || meta
        }
        return { id: idOf(name, version, subpath, variant), file: rel, format: meta.format === 'esm' ? 'esm' : 'cjs', executables: Array.isArray(meta.executables) ? meta.executables : [] }
      })())
    }
    return memo.get(rel)
  }
}
