// The bundle's source map (docs/runner-protocol.md, "Stacks"): esbuild's map of the bundle, its
// sources renamed so that nothing of the machine is in it (the user's files relative to the
// entry's folder), only the segments of the user's own code kept (npm packages' frames stay
// bundle positions, and the map stays the size of the user's code: axios alone would add
// 450 kB), inlined at the bundle's end without `sourcesContent`. The runner maps a stack's frames
// with it only when a stack is made (stacks.mjs).
import path from 'node:path'
import { decode, encode } from '@jridgewell/sourcemap-codec'
import { MAP_PREFIX } from './stacks.mjs'

// A source map the code links to by file (`//# sourceMappingURL=/some/file`): esbuild would read
// that file. Component code gets no map then; a `data:` map is only text the code carries.
const LINKED_MAP = /[#@]\s*sourceMappingURL\s*=\s*(?!data:)/

export const linksAFile = (text) => LINKED_MAP.test(text)

// A package's file as esbuild is given it: its map comments made inert, since an npm package is
// anyone's code (a linked map is a file esbuild would read; its segments would be dropped anyway).
export function withoutMapLinks(text) {
  return text.includes('sourceMappingURL') ? text.replace(/(\/[/*][#@]\s*)sourceMappingURL(?=\s*=)/g, '$1map-ignored') : text
}

// A source's name as users see it, or null for a package's file. `sources` are relative to
// `dir` (the entry's folder).
export function sourceName(source, dir, platformDir, entry) {
  if (source.startsWith('hw-package:')) return null // a package's stand-in (packages.mjs)
  const abs = path.resolve(dir, source)
  if (abs === platformDir || abs.startsWith(platformDir + path.sep)) {
    return path.posix.join('node_modules', '@pipedream', 'platform', path.relative(platformDir, abs).split(path.sep).join('/'))
  }
  if (abs.includes(`${path.sep}node_modules${path.sep}`)) return null
  if (abs === path.join(dir, entry.bundled)) return entry.shown
  return path.relative(dir, abs).split(path.sep).join('/')
}

// esbuild's map (JSON text) -> the comment that ends the bundle: the user's sources and their
// segments only (segments are [column, source, line, column, name?]: names are not used).
export function inlineMap(mapText, dir, platformDir, entry) {
  const map = JSON.parse(mapText)
  const names = (map.sources || []).map((s) => sourceName(String(s), dir, platformDir, entry))
  const kept = []
  const index = names.map((n) => (n === null ? -1 : kept.push(n) - 1))
  const lines = decode(map.mappings || '').map((line) =>
    line.filter((seg) => seg.length >= 4 && index[seg[1]] >= 0).map((seg) => [seg[0], index[seg[1]], seg[2], seg[3]]))
  const out = { version: 3, sources: kept, names: [], mappings: encode(lines) }
  return MAP_PREFIX + Buffer.from(JSON.stringify(out)).toString('base64') + '\n'
}
