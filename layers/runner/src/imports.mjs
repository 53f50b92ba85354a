// Which imports a component may have (docs/security.md, "The bundler"; docs/runner-protocol.md,
// "Bundler"): checked before anything runs or is named to npm, and what they resolve to checked
// again afterwards. Pure checks of specifiers and paths.
import { isBuiltin } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'

// `name@version/subpath` (scoped too) -> {name, version|null, subpath}
export function parseSpecifier(spec) {
  const m = /^((?:@[^/@\s]+\/)?[^/@\s][^/@\s]*)(?:@([^/]*))?(\/.*)?$/.exec(spec)
  if (!m) return null
  return { name: m[1], version: m[2] || null, subpath: m[3] || '' }
}

export const isBare = (s) => !s.startsWith('.') && !s.startsWith('/') && !/^[a-z][a-z0-9+.-]*:/i.test(s)
export const isPipedream = (name) => name === '@pipedream/platform' || name === '@pipedream/types'

export function builtinName(spec) {
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
export const quoted = (spec) => (spec.length > 200 ? `${spec.slice(0, 200)}...` : spec)

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

export // Whether an importer is the entry itself (esbuild names stdin `<resolveDir>/<sourcefile>`).
function isEntry(importer, stdin) {
  return importer === '' || importer === '<stdin>' || importer === path.join(stdin.resolveDir, stdin.sourcefile)
}

export function insideRoots(file, roots) {
  const real = (() => {
    try {
      return fs.realpathSync(file)
    } catch {
      return path.resolve(file)
    }
  })()
  return roots.some((root) => real === root || real.startsWith(root + path.sep))
}
