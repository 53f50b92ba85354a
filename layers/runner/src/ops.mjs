// The ops that run component code (docs/runner-protocol.md, "ops"): a request's fields checked
// and turned into calls of the instance on a worker of its code (run, hook) or on the bundle's describe worker
// (describe, additional_props, options).
import { bundleOf } from './bundles.mjs'
import { runMany } from './batch.mjs'
import { callWorker } from './calls.mjs'
import { RunnerError } from './errors.mjs'
import { DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_MS } from './limits.mjs'
import { metaResultOf, resultOf } from './results.mjs'

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

function timeoutOf(req) {
  const t = req.timeout_ms
  return Number.isFinite(t) && t > 0 ? t : DEFAULT_TIMEOUT_MS
}
function memoryOf(req) {
  const m = req.memory_mb
  return Number.isFinite(m) && m > 0 ? Math.round(m) : DEFAULT_MEMORY_MB
}
function envOf(req) {
  if (req.env === undefined || req.env === null) return {}
  if (!isObj(req.env)) throw new RunnerError('BAD_REQUEST', 'env must be an object')
  const env = {}
  for (const [k, v] of Object.entries(req.env)) if (v !== undefined && v !== null) env[k] = String(v)
  return env
}

// The file name code sent as text is shown under in stacks (`file`, optional; stacks.mjs).
const FILE = /^(?!\.)[A-Za-z0-9._-]{1,128}\.(?:[mc]?js|[mc]?ts)$/
function fileOf(req) {
  if (req.file === undefined || req.file === null) return null
  if (typeof req.file !== 'string' || !FILE.test(req.file)) throw new RunnerError('BAD_REQUEST', 'file must be a base name ending in .js, .mjs, .cjs, .ts, .mts or .cts')
  return req.file
}

// run and hook: one call of the instance on a worker of its code, or a batch of runs (`events`, batch.mjs).
export async function runOp(req, onPartial) {
  if (typeof req.instance !== 'string' || req.instance === '') throw new RunnerError('BAD_REQUEST', `${req.op} needs an instance`)
  if (req.op === 'hook' && typeof req.hook !== 'string') throw new RunnerError('BAD_REQUEST', 'hook needs a hook name')
  const bundle = { ...bundleOf(req), file: fileOf(req) }
  const callRuns = (wreqs, partialFor, onEnded) =>
    callWorker({ instance: req.instance }, bundle, envOf(req), memoryOf(req), req.op, wreqs, timeoutOf(req), req.id, partialFor, onEnded)
  if (req.op === 'run' && req.events !== undefined) return runMany(req, callRuns, onPartial)
  const wreq = { props: req.props, db: req.db, event: req.event, http: req.http, hook: req.hook, steps: req.steps }
  const [m] = await callRuns([wreq], () => onPartial)
  return resultOf(m)
}

// describe, additional_props and options: one call on the bundle's describe worker.
export async function metaOp(req) {
  const bundle = bundleOf(req)
  const wreq = { props: req.props, prop: req.prop, page: req.page, prevContext: req.prevContext, query: req.query }
  const [m] = await callWorker({ meta: bundle.hash }, bundle, envOf(req), memoryOf(req), req.op, [wreq], timeoutOf(req), req.id, null)
  return metaResultOf(m)
}

export function optionsOp(req) {
  if (typeof req.prop !== 'string') throw new RunnerError('BAD_REQUEST', 'options needs a prop name')
  return metaOp(req)
}
