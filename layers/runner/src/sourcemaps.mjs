// The bundle's source map (docs/runner-protocol.md, "Stacks"): esbuild's map of the bundle, its
// sources renamed so that nothing of the machine is in it (the user's files relative to the
// entry's folder, a package's files as `node_modules/<package>/...`), inlined at the bundle's end
// without `sourcesContent`; the runner maps a stack's frames with it only when a stack is made.
import path from 'node:path'

export const MAP_PREFIX = '\n//# sourceMappingURL=data:application/json;base64,'

// A source map the code links to by file (`//# sourceMappingURL=/some/file`): esbuild would read
// that file. Component code gets no map then; a `data:` map is only text the code carries.
const LINKED_MAP = /[#@]\s*sourceMappingURL\s*=\s*(?!data:)/

export const linksAFile = (text) => LINKED_MAP.test(text)

// The same comment in a package's file, made inert before esbuild reads the file: an npm package
// is anyone's code too (its frames are mapped to its JavaScript, not to its own sources).
export function withoutLinkedMaps(text) {
  return text.replace(/(\/[/*][#@]\s*)sourceMappingURL(?=\s*=\s*(?!data:))/g, '$1linked-map-ignored')
}

// A source's name as users see it: `sources` are relative to `dir` (the entry's folder).
export function sourceName(source, dir, platformDir, entry) {
  const abs = path.resolve(dir, source)
  if (abs === platformDir || abs.startsWith(platformDir + path.sep)) {
    return path.posix.join('node_modules', '@pipedream', 'platform', path.relative(platformDir, abs).split(path.sep).join('/'))
  }
  const nm = abs.lastIndexOf(`${path.sep}node_modules${path.sep}`)
  if (nm >= 0) return abs.slice(nm + 1).split(path.sep).join('/')
  if (abs === path.join(dir, entry.bundled)) return entry.shown
  return path.relative(dir, abs).split(path.sep).join('/')
}

// esbuild's map (JSON text) -> the comment that ends the bundle.
export function inlineMap(mapText, dir, platformDir, entry) {
  const map = JSON.parse(mapText)
  map.sources = (map.sources || []).map((s) => sourceName(String(s), dir, platformDir, entry))
  delete map.sourcesContent
  delete map.sourceRoot
  return MAP_PREFIX + Buffer.from(JSON.stringify(map)).toString('base64') + '\n'
}
