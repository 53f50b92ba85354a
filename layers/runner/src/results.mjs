// What a call produced, as the wire carries it (docs/runner-protocol.md, "run"): the state the
// worker's messages build up while the call runs (so a call that is killed still reports what it
// did), and the call's final message turned into a run result or a describe/options answer.
import { workerError } from './errors.mjs'
import { cleanStack } from './stacks.mjs'

// The state of a call in progress; `reqId` and `onPartial` say where its `respond` partial goes,
// `settle(m)` (set by calls.mjs) ends it.
export function callState(callId, reqId, onPartial) {
  return { callId, reqId, onPartial, emits: [], logs: [], db_writes: {}, exports: {}, sends: [], response: null, settle: null }
}

// One message of the worker about the call (its final `done`/`fail` is the caller's).
export function collect(call, m) {
  switch (m.t) {
    case 'log': call.logs.push({ level: m.level, message: m.message, ts: m.ts }); break
    case 'emit': call.emits.push({ event: m.event, meta: m.meta }); break
    case 'db': call.db_writes[m.key] = m.value; break
    case 'export': call.exports[m.name] = m.value; break
    case 'send': call.sends.push({ type: m.type, config: m.config }); break
    case 'respond':
      if (!call.response) {
        call.response = m.response
        if (call.onPartial) {
          try { call.onPartial({ id: call.reqId, partial: 'respond', response: m.response }) } catch { /* caller's problem */ }
        }
      }
      break
  }
}

// Output of the worker's own stdout/stderr (console.table, process.stdout.write...) as a log line.
export function collectStream(call, level, s) {
  const message = s.endsWith('\n') ? s.slice(0, -1) : s
  call.logs.push({ level, message, ts: Date.now() })
}

// A call's final message as a run result (a `fail` is thrown: the call did not run).
export function resultOf(m) {
  if (m.t === 'fail') throw workerError(m.error.code, m.error.message, m.error.stack)
  const st = m.state
  let error = null
  if (m.t === 'killed') error = { code: m.code, name: m.code === 'TIMEOUT' ? 'TimeoutError' : m.code === 'OUT_OF_MEMORY' ? 'OutOfMemoryError' : 'Error', message: m.message, stack: cleanStack(m.stack) }
  else error = m.error ?? null
  const result = {
    emits: st.emits,
    db_writes: st.db_writes,
    logs: st.logs,
    response: st.response,
    error,
    duration_ms: m.duration_ms,
  }
  if ('return_value' in m || Object.keys(st.exports).length || st.sends.length) {
    result.return_value = m.return_value ?? null
    result.exports = st.exports
    result.sends = st.sends
    if (m.flow_exit) result.flow_exit = m.flow_exit
  }
  return result
}

// A describe, additional_props or options call's final message as its answer (else thrown).
export function metaResultOf(m) {
  if (m.t === 'done') return m.result
  if (m.t === 'fail') throw workerError(m.error.code, m.error.message, m.error.stack)
  throw workerError(m.code, m.message, cleanStack(m.stack))
}
