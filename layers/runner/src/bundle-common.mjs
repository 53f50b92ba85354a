// What the bundler's modules (bundle.mjs and the modules it uses) share: its error, the runner's
// directory, a temporary directory and atomic writes.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const RUNNER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const TMP_DIR = fs.existsSync('/tmp') ? '/tmp' : process.cwd()

// A failure the bundler answers with (`LOAD_ERROR`, `INSTALL_ERROR`, `NATIVE_ADDON`, `NEEDS_EXECUTABLE`).
export class BundleError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

export function readJSON(p) {
  try {
    return JSON.parse(fs.readFileSync(p, 'utf8'))
  } catch {
    return null
  }
}

export function writeAtomic(file, text) {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
  const tmp = `${file}.tmp-${process.pid}-${Date.now()}`
  fs.writeFileSync(tmp, text)
  fs.renameSync(tmp, file)
}
