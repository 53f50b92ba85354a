// Network access of component code (docs/security.md, docs/runner-protocol.md "Egress").
//
// A runner's sandbox has no network interface but lo. Its one way out is the service's egress
// proxy, reached through the control socket of the runner's egress directory. Every TCP
// connection a component makes goes through net.Socket.prototype.connect (net.connect,
// net.createConnection, http, https and undici's fetch all end there); this module replaces it:
// it asks the proxy (`CONNECT <host> <port>`), which resolves the host once, checks every address
// against the service's URL policy and connects; the socket is then connected to the one-use Unix
// socket the proxy answers with, spliced to that connection. A refusal becomes an ECONNREFUSED
// error whose message says why ("refused by policy: ..."). tls.connect is routed the same way
// (its TLSSocket gets a Unix socket handle under TLS). Listening (net, http, dgram) is refused.
//
// This is the functional layer: the sandbox's network namespace is what makes it the only way.
import net from 'node:net'
import tls from 'node:tls'
import dgram from 'node:dgram'

const setTimeoutOrig = globalThis.setTimeout // before confine.mjs tracks the component's timers
const TLS_MARK = 'headwater:egress-tls' // tls.connect's own socket: connect it through the proxy
const HOST = /^[A-Za-z0-9._:%[\]-]{1,253}$/

function refusedListen() {
  const e = new Error('listen() is not available to components: a component cannot accept connections (its runner has no network of its own)')
  e.code = 'ERR_ACCESS_DENIED'
  throw e
}

function connectError(answer, host, port) {
  if (answer.code === 'ENOTFOUND') {
    return Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', errno: -3008, syscall: 'getaddrinfo', hostname: host })
  }
  const code = answer.code === 'EPOLICY' ? 'ECONNREFUSED' : answer.code
  const e = new Error(`connect ${code} ${host}:${port} - ${answer.message}`)
  return Object.assign(e, { code, syscall: 'connect', address: host, port, policy: answer.code === 'EPOLICY' })
}

// Installs the patches in this thread. `dir` is the runner's egress directory. Returns the set of
// sockets opened through it (still open), so a run can close what it opened.
export function installEgress(dir) {
  const origConnect = net.Socket.prototype.connect
  const control = `${dir}/control.sock`
  const open = new Set()

  // One control request: resolves to {name} (the ticket socket) or {code, message}.
  function ask(host, port, sock) {
    return new Promise((resolve) => {
      const c = new net.Socket()
      let reply = ''
      const done = (answer) => {
        resolve(answer)
        c.destroy()
      }
      sock.once('close', () => done({ code: 'ECONNABORTED', message: 'the socket was closed while connecting' }))
      c.setEncoding('utf8')
      c.on('connect', () => c.write(`CONNECT ${host} ${port}\n`))
      c.on('data', (d) => {
        reply += d
        const end = reply.indexOf('\n')
        if (end < 0) return
        const line = reply.slice(0, end)
        if (line.startsWith('OK ')) return done({ name: line.slice(3).trim() })
        const m = /^ERR (\S+) (.*)$/.exec(line)
        done(m ? { code: m[1], message: m[2] } : { code: 'ECONNREFUSED', message: 'the egress proxy gave no answer' })
      })
      c.on('error', (e) => done({ code: 'ECONNREFUSED', message: `the egress proxy is not reachable (${e.code})` }))
      c.on('close', () => done({ code: 'ECONNRESET', message: 'the egress proxy closed the request' }))
      origConnect.call(c, { path: control })
    })
  }

  function tunnel(sock, options, cb) {
    const host = options.host || 'localhost'
    const port = Number(options.port)
    if (!Number.isInteger(port) || port <= 0 || port > 65535 || (typeof options.port === 'string' && options.port.trim() === '')) {
      const e = new RangeError(`Port should be > 0 and < 65536. Received ${options.port}.`)
      e.code = 'ERR_SOCKET_BAD_PORT'
      throw e
    }
    if (typeof host !== 'string' || !HOST.test(host)) {
      const e = new TypeError(`invalid host ${JSON.stringify(host)}`)
      e.code = 'ERR_INVALID_ARG_VALUE'
      throw e
    }
    if (cb) sock.once('connect', cb)
    if (sock.write !== net.Socket.prototype.write) sock.write = net.Socket.prototype.write
    sock.connecting = true // writes wait for 'connect', as while a name resolves
    sock._host = host
    open.add(sock)
    sock.once('close', () => open.delete(sock))
    ask(host, port, sock).then((answer) => {
      if (sock.destroyed) return
      if (answer.name) origConnect.call(sock, { path: `${dir}/${answer.name}` })
      else sock.destroy(connectError(answer, host, port))
    })
    return sock
  }

  net.Socket.prototype.connect = function connect(...args) {
    const [options, cb] = Array.isArray(args[0]) ? args[0] : net._normalizeArgs(args)
    if (options.path !== undefined && options.path !== null && options.path !== TLS_MARK) {
      return origConnect.apply(this, args) // a Unix socket: only the sandbox's own exist
    }
    return tunnel(this, options, cb ?? null)
  }

  const origTlsConnect = tls.connect
  tls.connect = function connect(...args) {
    const [options, cb] = tlsArgs(args)
    if (options.socket || (options.path !== undefined && options.path !== null)) return origTlsConnect.apply(this, args)
    return origTlsConnect.call(this, { ...options, path: TLS_MARK }, cb)
  }

  net.Server.prototype.listen = refusedListen
  dgram.Socket.prototype.bind = refusedListen
  return open
}

// tls.connect's argument forms: (options[, cb]), (port[, host][, options][, cb]), (path[, options][, cb]).
function tlsArgs(args) {
  const list = [...args]
  const cb = typeof list[list.length - 1] === 'function' ? list.pop() : null
  const [options] = net._normalizeArgs(list)
  const merged = { ...options }
  const extra = list[1] !== null && typeof list[1] === 'object' ? list[1] : list[2]
  if (extra !== null && typeof extra === 'object' && extra !== options) Object.assign(merged, extra)
  return [merged, cb]
}

// Closes the sockets a run left open (its keep-alive connections included) and resolves once they
// are closed, so that what is still active afterwards is something else the run left behind.
export function closeSockets(open, waitMs = 200) {
  if (open.size === 0) return null
  const closing = [...open].map((s) => new Promise((resolve) => {
    if (s.closed) return resolve()
    s.once('close', resolve)
    s.destroy()
  }))
  return Promise.race([Promise.all(closing), new Promise((resolve) => setTimeoutOrig(resolve, waitMs))])
}
