// Several events of one instance in one request (docs/runner-protocol.md, "Several events in one
// call"), one after another on its worker, each run seeing the `db` its predecessors left: the
// same as that many `run` requests in a row, without a round trip to the service for each, and in
// one message to the worker. Each event's outcome is sent as a `result` partial as soon as it is
// known (so a runner that dies mid-way loses only the runs not yet reported), and partials carry
// the event's `index`. A run that times out, runs out of memory or leaves work behind ends its
// worker; the events after it go to a fresh one.
import { handOn } from './db.mjs'
import { RunnerError, wireError } from './errors.mjs'
import { resultOf } from './results.mjs'

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

// `callRuns(reqs, partialFor, onEnded)` runs calls of the instance on a worker (calls.mjs `callWorker`).
export async function runMany(req, callRuns, onPartial) {
  if (!Array.isArray(req.events)) throw new RunnerError('BAD_REQUEST', 'events must be an array')
  let db = isObj(req.db) ? req.db : {} // what the runs reported so far left (db.mjs)
  const report = onPartial || (() => {})
  const failed = (index, e) => report({ id: req.id, partial: 'result', ok: false, error: wireError(e), index })
  let index = 0
  while (index < req.events.length) {
    const first = index
    // Only the first carries the db: the worker hands each run's db on to the next, by the same rule.
    const wreqs = req.events.slice(first).map((event, i) => ({ props: req.props, db: i === 0 ? db : undefined, event, http: req.http }))
    // Each run is reported the moment it ends, not when its batch does.
    const ended = (_, m) => {
      try {
        const result = resultOf(m)
        db = handOn(db, result.db_writes)
        report({ id: req.id, partial: 'result', ok: true, result, index })
      } catch (e) {
        failed(index, e)
      }
      index++
    }
    try {
      await callRuns(wreqs, (i) => (p) => report({ ...p, index: first + i }), ended)
    } catch (e) {
      if (e instanceof RunnerError && e.code === 'BUNDLE_MISSING') throw e // the service resends with code
      failed(index++, e)
      continue
    }
  }
  return { count: req.events.length }
}
