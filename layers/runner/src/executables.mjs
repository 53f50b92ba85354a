// System executables a component runs (ffmpeg...), which it cannot: the runner allows no child
// processes (docs/security.md, "Inside the runner"). Found statically, so publishing says which
// program is missing rather than a run failing later: a `child_process` call (spawn, exec,
// execFile and their Sync forms) with a literal command in the component's own code, and the
// packages that only carry a program's binary (ffmpeg-static...). A command built at run time,
// or run by a package's code, is not seen here and fails when it runs (ERR_ACCESS_DENIED).
import fs from 'node:fs'
import path from 'node:path'
import { BundleError } from './bundle-common.mjs'
import { packageOf } from './natives.mjs'

const CARRIERS = new Map([
  ['ffmpeg-static', 'ffmpeg'], ['@ffmpeg-installer/ffmpeg', 'ffmpeg'], ['ffprobe-static', 'ffprobe'],
  ['@ffprobe-installer/ffprobe', 'ffprobe'], ['youtube-dl-exec', 'yt-dlp'], ['pdf-poppler', 'pdftocairo'],
])
const CALLS = 'spawn|spawnSync|exec|execSync|execFile|execFileSync'
const MODULE = String.raw`["'](?:node:)?child_process["']`

// The program names a text runs through child_process with a literal command.
export function commandsIn(text) {
  if (!/child_process/.test(text)) return []
  const objects = new Set()
  const functions = new Map() // local name -> child_process function
  for (const m of text.matchAll(new RegExp(String.raw`(?:const|let|var)\s+([\w$]+)\s*=\s*(?:__toESM\()?require\(${MODULE}\)`, 'g'))) objects.add(m[1])
  for (const m of text.matchAll(new RegExp(String.raw`import\s+(?:\*\s+as\s+)?([\w$]+)\s+from\s+${MODULE}`, 'g'))) objects.add(m[1])
  const named = new RegExp(String.raw`(?:import\s*\{([^}]*)\}\s*from\s*${MODULE}|(?:const|let|var)\s*\{([^}]*)\}\s*=\s*require\(${MODULE}\))`, 'g')
  for (const m of text.matchAll(named)) {
    for (const part of (m[1] || m[2]).split(',')) {
      const [orig, local] = part.split(/\s+as\s+|\s*:\s*/).map((x) => x.trim())
      if (new RegExp(`^(${CALLS})$`).test(orig)) functions.set(local || orig, orig)
    }
  }
  const found = new Set()
  const literal = String.raw`\(\s*(["'\`])\s*([A-Za-z0-9_./+-]+)`
  const callers = [...[...objects].map((o) => `${o.replace('$', '\\$')}\\s*\\.\\s*(?:${CALLS})`), ...[...functions.keys()].map((f) => `(?<![\\w$.])${f.replace('$', '\\$')}`)]
  for (const caller of callers) {
    for (const m of text.matchAll(new RegExp(caller + literal, 'g'))) found.add(path.posix.basename(m[2]))
  }
  return [...found]
}

// `entry`: the entry's text; `files`: the bundle's input files (absolute).
export function executablesOf(entry, files) {
  const found = new Set(commandsIn(entry))
  for (const file of files) {
    const pkg = packageOf(file)
    if (pkg) {
      if (CARRIERS.has(pkg.name)) found.add(CARRIERS.get(pkg.name))
      continue
    }
    if (!/\.(c|m)?[jt]s$/.test(file)) continue
    try {
      for (const name of commandsIn(fs.readFileSync(file, 'utf8'))) found.add(name)
    } catch { /* stdin's own name, or a file esbuild read from elsewhere */ }
  }
  return [...found].sort()
}

export function executablesError(names) {
  const list = names.map((n) => `"${n}"`).join(', ')
  return new BundleError('NEEDS_EXECUTABLE', `the component runs the system executable ${list} (child_process), which components cannot run: the runner starts no programs`)
}
