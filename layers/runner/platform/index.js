// Headwater's own implementation of the `@pipedream/platform` surface that components import
// (see shared DECISIONS.md, "What real components import"). Required by bundles at run time
// (src/worker.mjs) in place of the published package, which is never installed.
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { Readable } from 'node:stream'

// axios is loaded when a request is first made, not with the platform: describing a component
// (its props) never needs it, and loading it was most of a describe worker's start (~0.1-0.3 s
// of CPU each, one worker per component published).
const require = createRequire(import.meta.url)
let loadedAxios = null
const realAxios = () => (loadedAxios ??= require('axios'))

export const DEFAULT_POLLING_SOURCE_TIMER_INTERVAL = 900
// Pipedream's own Gmail OAuth client has no meaning here: no connected account ever carries it.
export const PD_OFFICIAL_GMAIL_OAUTH_CLIENT_ID = null
export const END_NEEDLE = '__pd_end'
export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD']

export class ConfigurationError extends Error {
  constructor(message, exposeStack = false) {
    super(message)
    this.name = 'ConfigurationError'
    this.exposeStack = !!exposeStack
  }
}

// Ends the run early without an error (the runner reports it as a flow exit).
export function $end(message) {
  const e = new Error(message === undefined ? '' : String(message))
  e.name = 'EndSignal'
  e[END_NEEDLE] = true
  e.reason = message === undefined ? null : String(message)
  throw e
}

function cycleReplacer() {
  const ancestors = []
  return function (key, value) {
    if (typeof value === 'bigint') return value.toString()
    if (value === null || typeof value !== 'object') return value
    // `this` is the object holding `key`: drop ancestors that are no longer on the path.
    while (ancestors.length > 0 && ancestors[ancestors.length - 1] !== this) ancestors.pop()
    if (ancestors.includes(value)) return '[Circular]'
    ancestors.push(value)
    return value
  }
}

export function jsonStringifySafe(value, replacer, space) {
  const safe = cycleReplacer()
  const fn = typeof replacer === 'function'
    ? function (k, v) { return safe.call(this, k, replacer.call(this, k, v)) }
    : safe
  return JSON.stringify(value, fn, space)
}

export function cloneSafe(value) {
  const s = jsonStringifySafe(value)
  return s === undefined ? undefined : JSON.parse(s)
}

function buildUrl(config) {
  let url = config.url || ''
  if (config.baseURL && !/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    url = config.baseURL.replace(/\/+$/, '') + '/' + url.replace(/^\/+/, '')
  }
  const params = config.params
  if (params && typeof params === 'object') {
    const u = new URL(url)
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined || v === null) continue
      if (Array.isArray(v)) for (const x of v) u.searchParams.append(k, String(x))
      else u.searchParams.append(k, typeof v === 'object' ? JSON.stringify(v) : String(v))
    }
    url = u.toString()
  }
  return url
}

// The request as an OAuth 1.0a signer needs it: upper-case method and the full URL
// (baseURL and params applied), plus the form data when there is some.
export function transformConfigForOauth(config = {}) {
  const out = { method: String(config.method || 'GET').toUpperCase(), url: buildUrl(config) }
  if (config.data && typeof config.data === 'object' && !Buffer.isBuffer(config.data)) out.data = config.data
  return out
}

function stepExport(step, value, name) {
  if (step && typeof step.export === 'function') {
    try {
      step.export(name, cloneSafe(value))
    } catch { /* exports are best effort */ }
  }
}

function responseSummary(res) {
  return { status: res.status, statusText: res.statusText, headers: res.headers && typeof res.headers.toJSON === 'function' ? res.headers.toJSON() : res.headers, data: res.data }
}

async function callAxios(instance, step, config) {
  if (!config || typeof config !== 'object') throw new TypeError('axios($, config): config must be an object')
  if (Object.hasOwn(config, 'body')) {
    throw new ConfigurationError('axios config has a `body` key: use `data` for the request body')
  }
  const { debug, returnFullResponse, ...rest } = config
  if (debug) stepExport(step, rest, 'debug_config')
  try {
    const res = await instance.request(rest)
    if (debug) stepExport(step, responseSummary(res), 'debug_response')
    return returnFullResponse ? res : res.data
  } catch (err) {
    if (debug && err && err.response) stepExport(step, responseSummary(err.response), 'debug_response')
    throw err
  }
}

// `instanceOf`: the axios instance, made when first needed (see realAxios).
function wrap(instanceOf) {
  const fn = (step, config, _signConfig) => callAxios(instanceOf(), step, config)
  fn.create = (defaults = {}) => {
    const { debug, returnFullResponse, ...rest } = defaults || {}
    let made = null
    return wrap(() => (made ??= instanceOf().create ? instanceOf().create(rest) : realAxios().create(rest)))
  }
  for (const name of ['interceptors', 'defaults']) {
    // read from the instance; a value assigned is the wrapper's own, as a plain property would be
    Object.defineProperty(fn, name, {
      get: () => instanceOf()[name],
      set: (value) => Object.defineProperty(fn, name, { value, writable: true, enumerable: true, configurable: true }),
      enumerable: true,
      configurable: true,
    })
  }
  return fn
}

export const axios = wrap(realAxios)

function isUrl(s) {
  return /^https?:\/\//i.test(s)
}

function localPath(p) {
  return path.isAbsolute(p) ? p : path.join('/tmp', p)
}

const MIME = {
  '.txt': 'text/plain', '.json': 'application/json', '.csv': 'text/csv', '.html': 'text/html',
  '.xml': 'application/xml', '.pdf': 'application/pdf', '.png': 'image/png', '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp', '.svg': 'image/svg+xml',
  '.mp3': 'audio/mpeg', '.mp4': 'video/mp4', '.zip': 'application/zip', '.gz': 'application/gzip',
}

export async function getFileStreamAndMetadata(pathOrUrl) {
  if (isUrl(pathOrUrl)) {
    const res = await fetch(pathOrUrl)
    if (!res.ok) {
      const err = new Error(`Failed to fetch ${pathOrUrl}: ${res.status} ${res.statusText}`)
      err.status = res.status
      throw err
    }
    const h = res.headers
    const len = h.get('content-length')
    const lm = h.get('last-modified')
    let name = path.basename(new URL(pathOrUrl).pathname) || 'file'
    const cd = h.get('content-disposition')
    const m = cd && /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(cd)
    if (m) name = decodeURIComponent(m[1])
    return {
      stream: res.body ? Readable.fromWeb(res.body) : Readable.from([]),
      metadata: {
        size: len !== null ? Number(len) : undefined,
        contentType: h.get('content-type') || undefined,
        lastModified: lm ? new Date(lm) : undefined,
        name,
        etag: h.get('etag') || undefined,
      },
    }
  }
  const p = localPath(pathOrUrl)
  const st = await fs.promises.stat(p)
  return {
    stream: fs.createReadStream(p),
    metadata: {
      size: st.size,
      contentType: MIME[path.extname(p).toLowerCase()] || undefined,
      lastModified: st.mtime,
      name: path.basename(p),
      etag: `${st.mtimeMs.toString(16)}-${st.size.toString(16)}`,
    },
  }
}

export async function getFileStream(pathOrUrl) {
  return (await getFileStreamAndMetadata(pathOrUrl)).stream
}

function notImplemented(app, method) {
  return new ConfigurationError(`${method}() is not implemented by the ${app && app.app ? `"${app.app}" ` : ''}app`)
}

// Database apps spread `sqlProxy.methods` and `sqlProp.methods` into their own methods and define
// `executeQuery`, `getClientConfiguration`, `proxyAdapter` and `getSchema` themselves; these are
// the defaults underneath. There is no query proxy in Headwater: a query "with proxy" is the
// app's own `executeQuery`, run from the runner with its egress rules.
export const sqlProxy = {
  methods: {
    getClientConfiguration() {
      throw notImplemented(this, 'getClientConfiguration')
    },
    executeQuery() {
      throw notImplemented(this, 'executeQuery')
    },
    proxyAdapter(preparedStatement = {}) {
      const { sql, query, values, params } = preparedStatement || {}
      return { query: sql !== undefined ? sql : query, params: values !== undefined ? values : params }
    },
    executeQueryWithProxy(preparedStatement) {
      return this.executeQuery(preparedStatement)
    },
  },
}

// The `sql` prop's helpers: the schema an editor offers for completion.
export const sqlProp = {
  methods: {
    getSchema() {
      throw notImplemented(this, 'getSchema')
    },
    async getSchemaForSqlProp() {
      return this.getSchema()
    },
  },
}

export default {
  axios, ConfigurationError, DEFAULT_POLLING_SOURCE_TIMER_INTERVAL, END_NEEDLE, HTTP_METHODS,
  PD_OFFICIAL_GMAIL_OAUTH_CLIENT_ID, $end, cloneSafe, jsonStringifySafe, transformConfigForOauth,
  getFileStream, getFileStreamAndMetadata, sqlProxy, sqlProp,
}
