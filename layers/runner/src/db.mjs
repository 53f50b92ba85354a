// `this.db` (docs/runner-protocol.md, "run"), in one place: the `$.service.db` object a run gets
// over the db it was given, and the one rule by which a run hands the db on to the next run of a
// batch. The rule is used in the worker between the runs of one message (worker.mjs) and in the
// main thread when the rest of a batch goes to a fresh worker (batch.mjs), so a run sees the same
// db whichever worker runs it; it is the service's own (`merge_db`, domain/runs.py).

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

function toJSON(v) {
  const s = JSON.stringify(v)
  return s === undefined ? undefined : JSON.parse(s)
}

// The db the next run sees: the one this run was given (an object, else empty) with this run's
// writes merged, a null deleting its key.
export function handOn(db, writes) {
  const next = { ...(isObj(db) ? db : {}), ...writes }
  for (const [k, v] of Object.entries(next)) if (v === null || v === undefined) delete next[k]
  return next
}

// The `$.service.db` prop of one run over `db`: synchronous get/set over a copy; a value is stored
// as JSON (undefined as null, a deletion). Each write is told to `onWrite(key, value)` as it
// happens (so a run killed later still reports it); `writes` holds the run's final values.
export function serviceDb(db, onWrite) {
  const store = isObj(db) ? { ...db } : {}
  const writes = {}
  const prop = {
    get(key) {
      key = String(key)
      return Object.hasOwn(store, key) ? store[key] : undefined
    },
    set(key, value) {
      key = String(key)
      const v = value === undefined ? null : toJSON(value) ?? null
      store[key] = v
      writes[key] = v
      onWrite(key, v)
    },
  }
  return { prop, writes }
}
