// The runner's limits (docs/runner-protocol.md, "ping" and "run"), read once from the environment:
// how many workers stay warm, how long and with how many instances each, how many bundles are held, a run's defaults.
function intEnv(name, dflt) {
  const v = Number.parseInt(process.env[name] ?? '', 10)
  return Number.isFinite(v) && v > 0 ? v : dflt
}

export const MEMORY_CHECK_MS = 50 // how often a running call's memory outside the heap is measured
export const MAX_WORKERS = intEnv('HEADWATER_RUNNER_MAX_WORKERS', 64)
// Instances of one code evaluated in one worker (each its own module scope, worker.mjs): past
// that, the least recently run one is dropped (it loads again on its next call).
export const MAX_INSTANCES = intEnv('HEADWATER_RUNNER_MAX_INSTANCES', 32)
export const IDLE_MS = intEnv('HEADWATER_RUNNER_IDLE_MS', 10 * 60 * 1000)
// Workers of describe, additional_props and options (one per bundle, not per instance): a
// registry publish describes hundreds of components once each, so only the few most recent stay
// loaded, briefly; each holds its component's whole module graph (tens of MB for an app's SDK).
export const MAX_META_WORKERS = intEnv('HEADWATER_RUNNER_MAX_META_WORKERS', 2)
export const META_IDLE_MS = intEnv('HEADWATER_RUNNER_META_IDLE_MS', 30 * 1000)
export const MAX_BUNDLES = intEnv('HEADWATER_RUNNER_MAX_BUNDLES', 256)
export const MAX_BUNDLE_BYTES = intEnv('HEADWATER_RUNNER_MAX_BUNDLE_BYTES', 64 * 1024 * 1024)
export const DEFAULT_TIMEOUT_MS = 30000
export const DEFAULT_MEMORY_MB = 256
