// The Node runner: `handle(request, onPartial?) -> response` (docs/runner-protocol.md), the
// envelope around the ops. Component code runs in worker threads shared by the instances of one
// code, each instance with its own module scope, kept warm in an LRU (slots.mjs); bundles are kept in an LRU by hash (bundles.mjs); calls on a worker, with their
// timeouts and memory bounds, are calls.mjs; the ops that make them ops.mjs and batch.mjs; what a
// call produced as a result, results.mjs.
import { bundleStats } from './bundles.mjs'
import { RunnerError, wireError } from './errors.mjs'
import { metaOp, optionsOp, runOp } from './ops.mjs'
import { endSlots, slotStats } from './slots.mjs'

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

const OPS = {
  ping: async () => ({ pong: true, pid: process.pid, node: process.version, ...stats() }),
  describe: metaOp,
  additional_props: metaOp,
  options: optionsOp,
  run: runOp,
  hook: runOp,
}

export async function handle(request, onPartial) {
  const id = isObj(request) ? request.id ?? null : null
  try {
    if (!isObj(request)) throw new RunnerError('BAD_REQUEST', 'the request must be a JSON object')
    const op = OPS[request.op]
    if (!op || !Object.hasOwn(OPS, request.op)) throw new RunnerError('BAD_REQUEST', `unknown op ${JSON.stringify(request.op)}`)
    const result = await op(request, onPartial)
    return { id, ok: true, result }
  } catch (e) {
    return { id, ok: false, error: wireError(e) }
  }
}

// Counts for monitoring.
export function stats() {
  return { ...slotStats(), ...bundleStats() }
}

// Terminate all workers (used on shutdown).
export const shutdown = endSlots
