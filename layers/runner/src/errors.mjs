// Errors of the runner as the wire carries them (docs/runner-protocol.md, "Envelope").
import { cleanStack } from './stacks.mjs'

export class RunnerError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

// An error the worker reported for a call (a `fail`, or a call it could not finish), thrown in
// the main thread: its stack is the component's and is passed on (cleaned).
export function workerError(code, message, stack) {
  return Object.assign(new RunnerError(code, message), { stack: stack ?? undefined, fromWorker: true })
}

// `{code, message, stack?}` of a thrown error. Stacks keep the component's frames only: nothing
// of the runner or the host (stacks.mjs); a RunnerError of the runner's own has none.
export function wireError(e) {
  const error = { code: e instanceof RunnerError ? e.code : 'RUNTIME_ERROR', message: e instanceof Error ? e.message : String(e) }
  if (e && typeof e.stack === 'string' && (e.fromWorker || !(e instanceof RunnerError))) error.stack = cleanStack(e.stack)
  return error
}
