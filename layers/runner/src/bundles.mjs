// The bundles this process holds (docs/runner-protocol.md, "Bundles"): an LRU by hash, bounded in
// count and bytes, so that a request may name a bundle by its hash alone.
import { createHash } from 'node:crypto'
import { RunnerError } from './errors.mjs'
import { MAX_BUNDLES, MAX_BUNDLE_BYTES } from './limits.mjs'

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const bundles = new Map() // hash -> code (Map order = LRU order)
let bundleBytes = 0

function rememberBundle(hash, code) {
  if (bundles.has(hash)) {
    bundles.delete(hash)
    bundles.set(hash, code)
    return
  }
  bundles.set(hash, code)
  bundleBytes += code.length
  for (const [h, c] of bundles) {
    if (bundles.size <= MAX_BUNDLES && bundleBytes <= MAX_BUNDLE_BYTES) break
    if (h === hash) continue
    bundles.delete(h)
    bundleBytes -= c.length
  }
}

// A request's bundle -> {hash, code|null}; code is null when a warm worker may already hold it.
export function bundleOf(req) {
  const b = req.bundle
  if (!isObj(b)) throw new RunnerError('BAD_REQUEST', 'request has no bundle')
  let { hash, code } = b
  if (code !== undefined && code !== null && typeof code !== 'string') throw new RunnerError('BAD_REQUEST', 'bundle.code must be a string')
  if (typeof hash !== 'string' || hash === '') {
    if (typeof code !== 'string') throw new RunnerError('BAD_REQUEST', 'bundle needs a hash or code')
    hash = createHash('sha256').update(code).digest('hex')
  }
  if (typeof code === 'string') {
    rememberBundle(hash, code)
    return { hash, code }
  }
  const known = bundles.get(hash)
  if (known !== undefined) {
    bundles.delete(hash)
    bundles.set(hash, known)
    return { hash, code: known }
  }
  return { hash, code: null }
}

export const bundleStats = () => ({ bundles: bundles.size, bundle_bytes: bundleBytes })
