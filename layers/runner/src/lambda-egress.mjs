// The AWS runner child's only way out (docs/security.md, "The Lambda runtime API"): the child runs
// under a seccomp filter that allows it no socket but AF_UNIX (launcher/launcher.c), so its
// component code's TCP connections go through this proxy in lambda.mjs, over the protocol of the
// local runner's (src/headwater/adapters/local/egress.py, its reference, and egress.mjs, its
// client): `CONNECT <host> <port>` on `<dir>/control.sock`, answered `OK <ticket socket name>` (a
// one-use Unix socket next to it, spliced to the upstream connection) or `ERR <code> <message>`.
// The host is resolved once and every address checked with the URL policy (url-policy.mjs, the
// port of domain/urls.py); the checked address is what is connected to. Loopback is always
// refused on Lambda (the runtime API listens there), private addresses unless the operator allows
// them; the runtime API's own address is refused whatever the rest says.
import crypto from 'node:crypto'
import dns from 'node:dns/promises'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { allowedAddresses, literalAddress, Refused, str, Unresolved } from './url-policy.mjs'

export const CONTROL = 'control.sock'
const LINE_MAX = 1024
const CONNECT_TIMEOUT_MS = 10_000
const ACCEPT_TIMEOUT_MS = 10_000
export const MAX_CONNECTIONS = 128 // open upstream connections (and requests being answered) per child

class Failure extends Error {
  constructor(code, message) {
    super(message.replace(/\n/g, ' '))
    this.code = code
  }
}

function parse(line) {
  const parts = line.split(/\s+/).filter(Boolean)
  if (parts.length !== 3 || parts[0] !== 'CONNECT' || !/^[0-9]+$/.test(parts[2]) || !(Number(parts[2]) > 0 && Number(parts[2]) < 65536)) {
    throw new Failure('EINVAL', 'expected: CONNECT <host> <port>')
  }
  return [parts[1], Number(parts[2])]
}

async function resolveAll(host) {
  return (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address)
}

function connectTo(address, port) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: address, port, allowHalfOpen: true })
    const timer = setTimeout(() => {
      s.destroy()
      const e = new Error(`no answer from ${address} port ${port} within ${CONNECT_TIMEOUT_MS / 1000} s`)
      e.code = 'ETIMEDOUT'
      reject(e)
    }, CONNECT_TIMEOUT_MS)
    s.once('connect', () => {
      clearTimeout(timer)
      resolve(s)
    })
    s.once('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
  })
}

// One child's proxy: `dir` holds its control socket (made here, under `root`). Options:
// allowPrivate (HEADWATER_ALLOW_PRIVATE_URLS), loopbackPorts (test-only: loopback ports allowed),
// runtimeApi ('host:port', refused always), resolve (host -> addresses).
export function egressProxy(root, { allowPrivate = false, loopbackPorts = new Set(), runtimeApi = '', resolve = resolveAll } = {}) {
  fs.mkdirSync(root, { recursive: true })
  const dir = fs.mkdtempSync(path.join(root, 'egress-'))
  const live = new Set() // every socket of this proxy, to close with it
  let open = 0
  let closed = false
  const api = runtimeApi ? literalAddress(runtimeApi.slice(0, runtimeApi.lastIndexOf(':'))) : null
  const apiPort = runtimeApi ? Number(runtimeApi.slice(runtimeApi.lastIndexOf(':') + 1)) : 0

  const track = (s) => {
    live.add(s)
    s.once('close', () => live.delete(s))
    return s
  }

  async function upstream(host, port) {
    let addresses
    try {
      addresses = await allowedAddresses(host, resolve, () => [loopbackPorts.has(port), allowPrivate])
    } catch (e) {
      if (e instanceof Refused) throw new Failure(e instanceof Unresolved ? 'ENOTFOUND' : 'EPOLICY', e.message)
      throw e
    }
    for (const address of addresses) {
      const addr = literalAddress(address)
      if (api && port === apiPort && addr && str(addr) === str(api)) {
        throw new Failure('EPOLICY', `refused by policy: ${host} port ${port} is the Lambda runtime API`)
      }
    }
    let error = null
    for (const address of addresses) {
      try {
        return await connectTo(address, port)
      } catch (e) {
        error = e
      }
    }
    throw new Failure(error?.code || 'ECONNREFUSED', `${host} port ${port}: ${error?.message || 'no address'}`)
  }

  // A one-use Unix socket: the first connection to it is spliced to `up`, then it is gone.
  function ticket(up) {
    const name = `t-${crypto.randomBytes(12).toString('hex')}.sock`
    const file = path.join(dir, name)
    return new Promise((resolve, reject) => {
      const server = net.createServer({ allowHalfOpen: true })
      const end = () => {
        clearTimeout(timer)
        server.close()
        fs.rm(file, { force: true }, () => {})
      }
      const timer = setTimeout(() => {
        end()
        up.destroy()
      }, ACCEPT_TIMEOUT_MS)
      server.once('connection', (conn) => {
        end()
        track(conn)
        splice(conn, up)
      })
      server.once('error', (e) => {
        end()
        reject(e)
      })
      server.listen(file, () => resolve(name))
    })
  }

  function splice(a, b) {
    for (const [from, to] of [[a, b], [b, a]]) {
      from.pipe(to) // ends `to` (half close) when `from` ends
      from.on('error', () => to.destroy())
      from.on('close', () => to.writableEnded || to.destroy())
    }
  }

  async function serve(conn) {
    let up = null
    try {
      const line = await readLine(conn)
      const [host, port] = parse(line)
      up = track(await upstream(host, port))
      up.on('close', () => open--)
      open++ // counted while it is open, the request's own count ends below
      const name = await ticket(up)
      conn.end(`OK ${name}\n`)
    } catch (e) {
      if (up) up.destroy()
      if (e instanceof Failure) conn.end(`ERR ${e.code} ${e.message}\n`)
      else conn.destroy()
    }
  }

  const server = net.createServer((conn) => {
    track(conn)
    conn.on('error', () => {})
    if (open >= MAX_CONNECTIONS) {
      conn.end(`ERR EMFILE too many open connections (at most ${MAX_CONNECTIONS} per runner)\n`)
      return
    }
    open++
    serve(conn).finally(() => open--)
  })
  server.listen(path.join(dir, CONTROL))

  return {
    dir,
    ready: new Promise((resolve, reject) => {
      server.once('listening', resolve)
      server.once('error', reject)
    }),
    close() {
      if (closed) return
      closed = true
      server.close()
      for (const s of live) s.destroy()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

function readLine(conn) {
  return new Promise((resolve, reject) => {
    let data = ''
    const timer = setTimeout(() => done(new Failure('EINVAL', 'the request line is missing or too long')), CONNECT_TIMEOUT_MS)
    const done = (error, line) => {
      clearTimeout(timer)
      conn.off('data', onData)
      conn.off('end', onEnd)
      if (error) reject(error)
      else resolve(line)
    }
    const onData = (d) => {
      data += d
      const end = data.indexOf('\n')
      if (end >= 0 && end < LINE_MAX) done(null, data.slice(0, end))
      else if (data.length >= LINE_MAX) done(new Failure('EINVAL', 'the request line is missing or too long'))
    }
    const onEnd = () => done(new Failure('EINVAL', 'the request line is missing or too long'))
    conn.setEncoding('utf8')
    conn.on('data', onData)
    conn.on('end', onEnd)
  })
}
