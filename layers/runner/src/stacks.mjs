// Error stacks as users see them (in $errors and $logs): the component's own frames, with paths
// relative to the component, and nothing of the runner or of the host (no runner frames, no
// checkout or data paths). The bundle is evaluated as `/component.js`; frames elsewhere are the
// runner's or Node's internals. A bundle that carries its source map (the bundler's
// sourcemaps.mjs) has its frames named by the user's file, line and column (`lib/helper.mjs:4:9`,
// `node_modules/@pipedream/platform/index.js:104:17`): the map is parsed the first time a stack
// is made, never on a run that makes none.
import { SourceMap } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'

// How the bundler ends a bundle with its map.
export const MAP_PREFIX = '\n//# sourceMappingURL=data:application/json;base64,'

const COMPONENT = '/component.js'
const FRAME = /^\s+at /
const OWN_FRAME = /[\s(/]component\.js:\d/ // before or after `relative` (not the runner's component.mjs)
// a frame mapped to a user's or a package's file: a relative path (the runner's are absolute,
// `file://` or `node:`)
const MAPPED_FRAME = /(?:^\s+at |\()(?![a-z]+:|\/|<)[^()\s][^()]*:\d+:\d+\)?$/
const BUNDLE_PATH = /(?<=^|[\s(])(?:file:\/\/)?\/component\.js(?=:\d)/g

const relative = (text) => text.replace(BUNDLE_PATH, 'component.js')

// A stack string with only the component's frames (null stays null).
export function cleanStack(stack) {
  if (typeof stack !== 'string') return stack ?? null
  const lines = stack.split('\n')
  const first = lines.findIndex((l) => FRAME.test(l))
  if (first < 0) return relative(stack)
  const frames = lines.slice(first).filter((l) => FRAME.test(l) && (OWN_FRAME.test(l) || MAPPED_FRAME.test(l)))
  return relative([...lines.slice(0, first), ...frames].join('\n'))
}

function header(error) {
  try {
    return Error.prototype.toString.call(error)
  } catch {
    return 'Error'
  }
}

// The bundle's map, or null: the comment the bundler put last (bundle text made elsewhere has none).
export function bundleMap(code) {
  if (typeof code !== 'string') return null
  const at = code.lastIndexOf(MAP_PREFIX)
  if (at < 0) return null
  const encoded = code.slice(at + MAP_PREFIX.length).trimEnd()
  if (encoded.includes('\n')) return null
  try {
    return new SourceMap(JSON.parse(Buffer.from(encoded, 'base64').toString('utf8')))
  } catch {
    return null
  }
}

// The name code sent as text is shown under without a file name (esbuild.mjs)
const UNNAMED = ['component.js', 'component.ts']

// `file:line:column` of the user's code at a position of the bundle, or null; `file`, when given,
// names an entry the bundler could not name (code sent as text).
function origin(map, line, column, file) {
  if (!map || !line || !column) return null
  try {
    // the segment's own position, as Node's --enable-source-maps prints it (findOrigin would add
    // the distance from the segment's start, which esbuild sets at a statement's indentation)
    // (a line with no segment, a package's, would find the last segment of an earlier line)
    const e = map.findEntry(line - 1, column - 1)
    if (!e || e.generatedLine !== line - 1 || typeof e.originalSource !== 'string' || !Number.isInteger(e.originalLine)) return null
    const source = file && UNNAMED.includes(e.originalSource) ? file : e.originalSource
    return `${source}:${e.originalLine + 1}:${e.originalColumn + 1}`
  } catch {
    return null
  }
}

// Formats every stack made in this thread the same way, so a stack printed by console.log or
// util.inspect carries no runner frames either. Code that sets its own Error.prepareStackTrace
// (source-map-support, depd) takes over, as in plain Node. `code` is the bundle, whose map is
// read when the first stack is made; `shownAs` the name of the user's file its entry is shown under
// (a code deploy's, given with the code), else `component.js`.
// The runner's platform module, which bundles require at run time (worker.mjs): its frames are
// named as the package the component imported, `node_modules/@pipedream/platform/index.js`.
const PLATFORM_FILE = fileURLToPath(new URL('../platform/index.js', import.meta.url))
const PLATFORM_SHOWN = 'node_modules/@pipedream/platform/index.js'

// A package bundle of the shared store (packages.mjs), as worker.mjs names it: its frames are kept
// as they are, positions in that package's bundle (its name says whose code it is).
const STORE_FILE = /^node_modules\/[^/]+@[^/]+\/[ri]_[^/]*\.cjs$/

export function installStackFilter(code, shownAs = null) {
  let map
  const mapOf = () => {
    if (map === undefined) map = bundleMap(code)
    return map
  }
  Error.prepareStackTrace = (error, callsites) => {
    const frames = []
    for (const site of callsites) {
      const text = String(site)
      const file = site.getFileName()
      if (file === PLATFORM_FILE || file === pathToFileURL(PLATFORM_FILE).href) {
        frames.push(`    at ${text.replace(file, PLATFORM_SHOWN)}`)
        continue
      }
      if (typeof file === 'string' && STORE_FILE.test(file)) {
        frames.push(`    at ${text}`)
        continue
      }
      if (!text.includes(COMPONENT)) continue
      const line = site.getLineNumber()
      const column = site.getColumnNumber()
      const where = site.getFileName() === COMPONENT ? origin(mapOf(), line, column, shownAs) : null
      const shown = where ? text.replace(`${COMPONENT}:${line}:${column}`, where) : text
      frames.push(`    at ${relative(shown)}`)
    }
    return [header(error), ...frames].join('\n')
  }
}
