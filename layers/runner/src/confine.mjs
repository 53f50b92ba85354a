// What component code may start inside its worker, and how a run ends what it started
// (docs/security.md). Installed in each component worker before the bundle is evaluated.
//
// - Worker threads are refused: a nested worker would get its own heap outside the run's
//   resourceLimits and could outlive the run.
// - Timers (setTimeout, setInterval, setImmediate, and timers/promises) are tracked, including
//   unref'd ones that process.getActiveResourcesInfo() does not show; when a call ends, those
//   still pending are cleared, so an interval cannot keep emitting or writing after run() returned.
// - Whatever else is still active after that (a socket, a file operation, a MessagePort...) is
//   reported by endCall(); the main thread then terminates the worker (the next call starts a
//   fresh one). A run that leaves nothing behind keeps its warm worker: the check is one
//   getActiveResourcesInfo() call, well under a microsecond.
import workerThreads from 'node:worker_threads'
import timers from 'node:timers'
import timersPromises from 'node:timers/promises'
import { builtinModules, syncBuiltinESMExports } from 'node:module'
import util from 'node:util'

function accessDenied(message) {
  const e = new Error(message)
  e.code = 'ERR_ACCESS_DENIED'
  return e
}

export function denyWorkers() {
  workerThreads.Worker = function Worker() {
    throw accessDenied('worker threads are not available to components (a run has one thread, bounded by its memory limit)')
  }
}

// `process.binding` is closed by the permission model. Packages ask it for 'natives' only to
// list Node's builtin modules (precinct, detective-*): that list is answered, keyed by name as
// Node's was, with a placeholder for each module's source, which components cannot read.
export function answerNativesBinding() {
  const closed = process.binding
  const natives = Object.freeze(Object.fromEntries(builtinModules.filter((m) => !m.startsWith('node:'))
    .map((m) => [m, `/* node:${m}: source not available to components */`])))
  process.binding = function binding(name) {
    if (name === 'natives') return natives
    return closed.call(process, name)
  }
}

const pending = new Set() // Timeout and Immediate objects of component code not yet fired or cleared
let abort = new AbortController() // aborted at the end of a call that used it: timers/promises waits end
let signalUsed = false

function withSignal(options) {
  signalUsed = true
  const mine = abort.signal
  if (options !== null && typeof options === 'object' && options.signal) return { ...options, signal: AbortSignal.any([options.signal, mine]) }
  return { ...(options !== null && typeof options === 'object' ? options : {}), signal: mine }
}

export function trackTimers() {
  const g = globalThis
  const orig = {
    setTimeout: g.setTimeout, setInterval: g.setInterval, setImmediate: g.setImmediate,
    clearTimeout: g.clearTimeout, clearInterval: g.clearInterval, clearImmediate: g.clearImmediate,
  }
  const once = (schedule) => function (fn, ...rest) {
    if (typeof fn !== 'function') return schedule(fn, ...rest) // throws like Node does
    const t = schedule(function (...args) {
      pending.delete(t)
      return fn.apply(this, args)
    }, ...rest)
    pending.add(t)
    return t
  }
  const repeating = (schedule) => function (...args) {
    const t = schedule(...args)
    pending.add(t)
    return t
  }
  const clearing = (clear) => function (t) {
    pending.delete(t)
    return clear(t)
  }
  const p = timersPromises
  const promised = {
    setTimeout: p.setTimeout, setImmediate: p.setImmediate, setInterval: p.setInterval,
  }
  p.setTimeout = (delay, value, options) => promised.setTimeout(delay, value, withSignal(options))
  p.setImmediate = (value, options) => promised.setImmediate(value, withSignal(options))
  p.setInterval = (delay, value, options) => promised.setInterval(delay, value, withSignal(options))
  if (p.scheduler) {
    const wait = p.scheduler.wait.bind(p.scheduler)
    p.scheduler.wait = (delay, options) => wait(delay, withSignal(options))
  }
  const patched = {
    setTimeout: once(orig.setTimeout), setImmediate: once(orig.setImmediate), setInterval: repeating(orig.setInterval),
    clearTimeout: clearing(orig.clearTimeout), clearInterval: clearing(orig.clearInterval), clearImmediate: clearing(orig.clearImmediate),
  }
  patched.setTimeout[util.promisify.custom] = p.setTimeout
  patched.setImmediate[util.promisify.custom] = p.setImmediate
  for (const [name, fn] of Object.entries(patched)) {
    g[name] = fn
    timers[name] = fn
  }
  return orig
}

// Makes the patched module exports visible to `import` as well as `require`.
export function publish() {
  syncBuiltinESMExports()
}

// What the resources of a fresh worker are, to compare the end of each call with.
export function snapshot() {
  return process.getActiveResourcesInfo()
}

// Ends what a call started; resolves to the kinds of resources still active beyond `baseline`
// (empty: the worker is clean and stays warm). `closing` is the egress sockets' close, or null.
export function endCall(orig, baseline, closing) {
  if (pending.size) {
    for (const t of pending) {
      if (t && t.constructor && t.constructor.name === 'Immediate') orig.clearImmediate(t)
      else orig.clearTimeout(t)
    }
    pending.clear()
  }
  if (signalUsed) {
    abort.abort(new Error('the run ended'))
    abort = new AbortController()
    signalUsed = false
  }
  const leftover = () => {
    const now = process.getActiveResourcesInfo()
    for (const kind of baseline) {
      const i = now.indexOf(kind)
      if (i >= 0) now.splice(i, 1)
    }
    return now
  }
  return closing ? closing.then(leftover) : leftover()
}
