// Error stacks as users see them (in $errors and $logs): the component's own frames, with paths
// relative to the component, and nothing of the runner or of the host (no runner frames, no
// checkout or data paths). The bundle is evaluated as `/component.js`; frames elsewhere are the
// runner's or Node's internals.
const COMPONENT = '/component.js'
const FRAME = /^\s+at /
const OWN_FRAME = /[\s(/]component\.js:\d/ // before or after `relative` (not the runner's component.mjs)

const relative = (text) => text.replaceAll(`file://${COMPONENT}`, 'component.js').replaceAll(COMPONENT, 'component.js')

// A stack string with only the component's frames (null stays null).
export function cleanStack(stack) {
  if (typeof stack !== 'string') return stack ?? null
  const lines = stack.split('\n')
  const first = lines.findIndex((l) => FRAME.test(l))
  if (first < 0) return relative(stack)
  const frames = lines.slice(first).filter((l) => FRAME.test(l) && OWN_FRAME.test(l))
  return relative([...lines.slice(0, first), ...frames].join('\n'))
}

function header(error) {
  try {
    return Error.prototype.toString.call(error)
  } catch {
    return 'Error'
  }
}

// Formats every stack made in this thread the same way, so a stack printed by console.log or
// util.inspect carries no runner frames either. Code that sets its own Error.prepareStackTrace
// (source-map-support, depd) takes over, as in plain Node.
export function installStackFilter() {
  Error.prepareStackTrace = (error, callsites) => {
    const frames = []
    for (const site of callsites) {
      const text = String(site)
      if (text.includes(COMPONENT)) frames.push(`    at ${relative(text)}`)
    }
    return [header(error), ...frames].join('\n')
  }
}
