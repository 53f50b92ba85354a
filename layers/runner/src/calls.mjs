// Calls on a worker (docs/runner-protocol.md, "run"): one instance's calls one at a time in arrival
// order (a worker runs one call at a time too, slots.mjs), a batch in one message, and each call's
// bounds kept from the main thread: its timeout and its memory (the heap by V8's resourceLimits,
// Buffers and other memory outside the heap by a watchdog) terminate the worker; so does a call
// that leaves work behind (worker.mjs reports it as `dirty`).
import { performance } from 'node:perf_hooks'
import { MEMORY_CHECK_MS } from './limits.mjs'
import { callState } from './results.mjs'
import { META, META_INSTANCE, instanceSlot, metaSlot } from './slots.mjs'

let nextCallId = 1

// Run calls of `target` on a worker, one after another (`{instance}`: on a worker of its code,
// slots.mjs; `{meta: hash}`: on the bundle's describe worker), with `env` as `process.env`: `reqs`
// go in one message and the worker runs them back to back, so a batch costs one hand-off between the threads, not two per run.
// Resolves with the worker's final message of each call that ended, in order: all of them, or
// fewer when one was killed ({t: 'killed', code: 'TIMEOUT'|'OUT_OF_MEMORY'|...}, with the state
// collected so far) or left work behind (`dirty`): its worker is gone, and the caller sends the
// rest again on a fresh one. Calls of one target run one at a time, in arrival order.
const queues = new Map() // key -> tail promise
export async function callWorker(target, bundle, env, memoryMb, op, reqs, timeoutMs, reqId, partialFor, onEnded = null) {
  const key = target.meta !== undefined ? `${META}${target.meta}` : `i:${target.instance}`
  const prev = queues.get(key)
  let release
  const mine = new Promise((r) => (release = r))
  const tail = prev ? prev.then(() => mine) : mine
  queues.set(key, tail)
  if (prev) await prev
  try {
    const meta = target.meta !== undefined
    const s = meta ? metaSlot(key, bundle, env, memoryMb) : instanceSlot(target.instance, bundle, env, memoryMb)
    s.pending++
    try {
      return await dispatch(s, meta ? META_INSTANCE : target.instance, env, op, reqs, timeoutMs, reqId, partialFor, onEnded)
    } finally {
      s.pending--
      s.lastUsed = Date.now()
    }
  } finally {
    release()
    if (queues.get(key) === tail) queues.delete(key)
  }
}

// `onEnded(i, m)` hears of each call as it ends (the service times each run by when it hears of it).
function dispatch(s, instance, env, op, reqs, timeoutMs, reqId, partialFor, onEnded) {
  return new Promise((resolve) => {
    const ended = []
    let timer = null
    let watch = null
    let started = 0
    const calls = reqs.map((req, i) => {
      const call = callState(nextCallId++, reqId, partialFor ? partialFor(i) : null)
      call.settle = (m) => {
        if (s.current !== call) return
        s.current = null
        clearTimeout(timer)
        clearTimeout(watch)
        timer = watch = null
        if (m.dirty) s.kill() // the call left timers, sockets or handles running: a fresh worker next time
        m.state = call
        m.duration_ms = Math.round((performance.now() - started) * 1000) / 1000 // measured here: the component cannot touch this clock
        ended.push(m)
        if (onEnded) onEnded(ended.length - 1, m)
        if (ended.length < calls.length && !s.dead) begin(calls[ended.length])
        else resolve(ended)
      }
      return call
    })
    // V8's limit covers the heap only; Buffers and ArrayBuffers count here (and the runner's
    // cgroup bounds the whole process whatever happens between two checks).
    const limit = s.memoryMb * 1024 * 1024
    const check = () => {
      watch = null
      const call = s.current
      s.worker.getHeapStatistics().then((h) => {
        if (s.current !== call || call === null) return
        if (h.used_heap_size + h.external_memory > limit) s.onDeath('OUT_OF_MEMORY', null)
        else if (watch === null) watch = setTimeout(check, MEMORY_CHECK_MS)
      }, () => {})
    }
    // Each call's time (and timeout) starts when the one before it ended: the worker starts it right then.
    const begin = (call) => {
      s.current = call
      started = performance.now()
      timer = setTimeout(() => {
        s.kill()
        call.settle({ t: 'killed', code: 'TIMEOUT', message: `the component did not finish within ${timeoutMs} ms`, stack: null })
      }, timeoutMs)
      watch = setTimeout(check, MEMORY_CHECK_MS)
    }
    begin(calls[0])
    s.worker.postMessage({ t: 'calls', instance, env, list: calls.map((call, i) => ({ c: call.callId, op, req: reqs[i] })) })
  })
}
