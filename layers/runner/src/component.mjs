// Component validation and prop normalization (pure functions, used inside workers).
// The rules are those of docs/runner-protocol.md ("describe" and "configurable_props").

export class LoadError extends Error {
  constructor(message) {
    super(message)
    this.name = 'LoadError'
    this.code = 'LOAD_ERROR'
  }
}

export const VALID_TYPES = new Set([
  'app', 'boolean', 'integer', 'string', 'object', 'any',
  '$.interface.http', '$.interface.timer', '$.interface.apphook', '$.service.db',
  'http_request', 'alert', 'dir', 'data_store', 'sql',
  'boolean[]', 'integer[]', 'string[]', 'object[]',
])

// App-specific prop types of real registry components (`$.airtable.baseId`, `$.discord.channel[]`).
const APP_TYPE = /^\$\.[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+(\[\])?$/

const SHORTHANDS = new Set(['$.service.db', '$.interface.http', '$.interface.timer'])
const HOOKS = ['deploy', 'activate', 'deactivate']

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const has = (v) => v !== undefined && v !== null

// The component object of an evaluated CommonJS bundle (ESM `export default` or module.exports).
export function pickComponent(exp) {
  if (exp && (typeof exp === 'object' || typeof exp === 'function')) {
    if (exp.__esModule && 'default' in exp) return exp.default
    if (isObj(exp.default) && !('name' in exp) && !('run' in exp) && !('props' in exp)) return exp.default
  }
  return exp
}

// Resolve one declared prop to its effective definition (shorthand expanded, propDefinition
// merged). Throws LoadError naming the prop.
export function resolveProp(name, p) {
  const where = `prop "${name}"`
  if (typeof p === 'string') {
    // `title: "string"` is `title: { type: "string" }` (registry components use it); `"app"` alone
    // names no app, so it is no shorthand
    if (SHORTHANDS.has(p) || (VALID_TYPES.has(p) && p !== 'app')) return { type: p }
    throw new LoadError(`${where}: "${p}" is not a known prop shorthand (use an object with a type)`)
  }
  if (!isObj(p)) throw new LoadError(`${where}: must be an object or a shorthand string, got ${p === null ? 'null' : Array.isArray(p) ? 'an array' : typeof p}`)
  let def = p
  if (p.propDefinition !== undefined) {
    const pd = p.propDefinition
    if (!Array.isArray(pd) || pd.length < 2) {
      throw new LoadError(`${where}: propDefinition must be [app, "definitionName", inputValues?]`)
    }
    const [app, defName] = pd
    if (!isObj(app)) throw new LoadError(`${where}: propDefinition names no app (first element is ${app === null ? 'null' : typeof app})`)
    const appName = typeof app.app === 'string' ? app.app : '(unnamed)'
    const defs = app.propDefinitions
    if (typeof defName !== 'string' || !isObj(defs) || !Object.hasOwn(defs, defName) || !isObj(defs[defName])) {
      throw new LoadError(`${where}: propDefinition "${String(defName)}" is not defined in app "${appName}"`)
    }
    const { propDefinition, ...own } = p
    def = { ...defs[defName], ...own }
  }
  if (typeof def.type !== 'string' || def.type === '') throw new LoadError(`${where}: has no type`)
  if (!VALID_TYPES.has(def.type) && !APP_TYPE.test(def.type)) throw new LoadError(`${where}: unknown type "${def.type}"`)
  if (def.type === 'app' && (typeof def.app !== 'string' || def.app === '')) {
    throw new LoadError(`${where}: an app prop needs an "app" name`)
  }
  for (const k of ['min', 'max']) {
    if (has(def[k]) && typeof def[k] !== 'number') throw new LoadError(`${where}: ${k} must be a number`)
  }
  if (has(def.min) && has(def.max) && def.min > def.max) {
    throw new LoadError(`${where}: min (${def.min}) is greater than max (${def.max})`)
  }
  if (has(def.options) && typeof def.options !== 'function' && !Array.isArray(def.options)) {
    throw new LoadError(`${where}: options must be an array or a function`)
  }
  return def
}

// One configurable_props entry; key order fixed by the protocol.
export function normalizeProp(name, def) {
  const o = { name, type: def.type }
  if (has(def.app)) o.app = def.app
  if (has(def.label)) o.label = def.label
  if (has(def.description)) o.description = def.description
  if (def.optional === true) o.optional = true
  if (has(def.default)) o.default = def.default
  if (Array.isArray(def.options)) o.options = def.options
  else if (typeof def.options === 'function') o.remoteOptions = true
  if (def.useQuery === true) o.useQuery = true
  if (has(def.min)) o.min = def.min
  if (has(def.max)) o.max = def.max
  if (def.secret === true) o.secret = true
  if (def.type === '$.interface.http' && def.customResponse === true) o.customResponse = true
  if (def.reloadProps === true) o.reloadProps = true
  if (def.hidden === true) o.hidden = true
  if (def.disabled === true) o.disabled = true
  if (has(def.alertType)) o.alertType = def.alertType
  if (has(def.content)) o.content = def.content
  if (def.withLabel === true) o.withLabel = true
  return o
}

// [[name, resolvedDef, declared], ...] in declaration order.
export function resolveProps(props) {
  if (props === undefined || props === null) return []
  if (!isObj(props)) throw new LoadError('props must be an object')
  return Object.keys(props).map((name) => [name, resolveProp(name, props[name]), props[name]])
}

// The start of the LoadError for a module that exports no component at all (a helper module,
// a sample event, a list of constants): registry publishing counts those apart.
export const NOT_A_COMPONENT = 'not a component'

// Validate an evaluated component; returns {component, props} or throws LoadError.
export function validateComponent(c) {
  if (!c || typeof c !== 'object' || Array.isArray(c)) {
    throw new LoadError(`${NOT_A_COMPONENT}: the module exports no component object (got ${c === null ? 'null' : Array.isArray(c) ? 'an array' : typeof c})`)
  }
  if (!has(c.key) && !has(c.version)) {
    throw new LoadError(`${NOT_A_COMPONENT}: the exported object has neither a key nor a version (a helper module?)`)
  }
  // a sample event (test-event.mjs) may well have a `version` field, but no code and no props
  if (typeof c.run !== 'function' && !isObj(c.props) && !isObj(c.methods) && !isObj(c.hooks)) {
    throw new LoadError(`${NOT_A_COMPONENT}: the exported object has no run, props, methods or hooks (data, not a component)`)
  }
  if (!has(c.name) || c.name === '') throw new LoadError('the component has no name')
  if (!has(c.version) || c.version === '') throw new LoadError('the component has no version')
  if (has(c.type) && c.type !== 'source' && c.type !== 'action') {
    throw new LoadError(`the component type must be "source" or "action", got ${JSON.stringify(c.type)}`)
  }
  const props = resolveProps(c.props)
  const type = c.type || 'source'
  const hasTimer = props.some(([, d]) => d.type === '$.interface.timer')
  if (typeof c.run !== 'function' && !(type === 'source' && hasTimer)) {
    throw new LoadError('the component has no run method')
  }
  if (has(c.methods) && !isObj(c.methods)) throw new LoadError('methods must be an object')
  if (has(c.hooks) && !isObj(c.hooks)) throw new LoadError('hooks must be an object')
  return { component: c, props, type, hasTimer }
}

// Whether code reads `$auth`: any function of the object (methods, options, hooks, run), deeply.
function readsAuth(v, seen = new Set()) {
  if (typeof v === 'function') return Function.prototype.toString.call(v).includes('$auth')
  if (!v || typeof v !== 'object' || seen.has(v)) return false
  seen.add(v)
  return Object.values(v).some((x) => readsAuth(x, seen))
}

// Methods the registry's app scaffold gives every app, which only show what `$auth` holds
// (`authKeys() { console.log(Object.keys(this.$auth)) }`): their mention of `$auth` says nothing
// of whether the app needs an account (the `schedule` app has one and needs none).
const AUTH_AGNOSTIC = new Set(['authKeys'])

function appReadsAuth(declared) {
  const { methods, ...rest } = declared
  if (!isObj(methods)) return readsAuth(declared)
  const used = Object.entries(methods).filter(([k]) => !AUTH_AGNOSTIC.has(k))
  return readsAuth(rest) || readsAuth(Object.fromEntries(used))
}

// An app prop needs credentials unless its app defines none: an app file (methods or
// propDefinitions) whose code never reads `$auth` (but to show it, see AUTH_AGNOSTIC), nor the
// component's through the prop (the `http` app), or an app that says `auth_type: "none"`. An app
// that declares `auth_type` "keys" or "oauth" needs one whatever its code reads.
function authType(c, name, declared) {
  const declaredType = isObj(declared) ? declared.auth_type ?? declared.authType : undefined
  if (declaredType === 'none') return 'none'
  if (declaredType === 'keys' || declaredType === 'oauth') return null
  if (!isObj(declared) || appReadsAuth(declared)) return null
  // a bare `{type: "app", app}` says nothing of its auth (the app file is elsewhere): it needs one
  if (!isObj(declared.methods) && !isObj(declared.propDefinitions)) return null
  const esc = name.replace(/[$]/g, '\\$')
  const viaProp = new RegExp(`\\b${esc}\\s*\\??\\.\\s*\\$auth|\\$auth\\b[^;]*=\\s*this\\s*\\??\\.\\s*${esc}\\b`)
  const texts = []
  const collect = (v, seen) => {
    if (typeof v === 'function') texts.push(Function.prototype.toString.call(v))
    else if (v && typeof v === 'object' && !seen.has(v)) {
      seen.add(v)
      for (const x of Object.values(v)) collect(x, seen)
    }
  }
  collect({ ...c, props: undefined }, new Set())
  return texts.some((t) => viaProp.test(t)) ? null : 'none'
}

export function describe(c, props) {
  return {
    name: c.name,
    key: has(c.key) ? c.key : null,
    type: c.type || 'source',
    version: c.version,
    description: has(c.description) ? c.description : null,
    dedupe: has(c.dedupe) ? c.dedupe : null,
    hooks: HOOKS.filter((h) => c.hooks && typeof c.hooks[h] === 'function'),
    has_additional_props: typeof c.additionalProps === 'function',
    configurable_props: props.map(([name, def, declared]) => {
      const o = normalizeProp(name, def)
      if (def.type === 'app' && authType(c, name, declared) === 'none') o.auth_type = 'none'
      return o
    }),
  }
}
