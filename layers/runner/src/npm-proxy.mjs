// npm's way to its registry (docs/security.md, "The bundler"): an HTTP proxy on 127.0.0.1 that
// opens connections to the registry's host and port only, directly or through the egress proxy.
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'

// npm's only way out: an HTTP proxy on 127.0.0.1 in this process that opens connections to the
// registry's host and port and refuses every other. In the service's sandbox (no network of its
// own: `egress` is its egress directory) each connection is asked of the service's egress proxy,
// which allows the same one host and port; elsewhere (Lambda, no sandbox) it connects directly.
// CONNECT for https registries, absolute-form requests for http ones.
export async function registryProxy(registry, egress) {
  const url = new URL(registry)
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase()
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80))
  const allowed = (h, p) => h.replace(/^\[(.*)\]$/, '$1').toLowerCase() === host && Number(p) === port
  const open = (h, p) => (egress ? viaEgress(egress, h, p) : direct(h, p))
  const server = http.createServer((req, res) => {
    let target
    try {
      target = new URL(req.url)
    } catch {
      target = null
    }
    if (!target || target.protocol !== 'http:' || !allowed(target.hostname, target.port || 80)) {
      res.writeHead(403).end()
      return
    }
    open(host, port).then((up) => {
      const headers = { ...req.headers }
      delete headers['proxy-connection']
      delete headers['proxy-authorization']
      const out = http.request({ method: req.method, path: target.pathname + target.search, headers, createConnection: () => up }, (answer) => {
        res.writeHead(answer.statusCode, answer.headers)
        answer.pipe(res)
      })
      out.on('error', () => res.destroy())
      req.pipe(out)
    }, () => res.writeHead(502).end())
  })
  server.on('connect', (req, client, head) => {
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url)
    client.on('error', () => {})
    if (!m || !allowed(m[1], m[2])) {
      client.end('HTTP/1.1 403 Forbidden\r\n\r\n')
      return
    }
    open(host, port).then((up) => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head && head.length) up.write(head)
      up.on('error', () => client.destroy())
      client.on('close', () => up.destroy())
      up.pipe(client)
      client.pipe(up)
    }, () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'))
  })
  server.on('clientError', (e, sock) => sock.destroy())
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  server.unref()
  return `http://127.0.0.1:${server.address().port}`
}

function direct(host, port) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port })
    s.once('connect', () => resolve(s))
    s.once('error', reject)
  })
}

// One connection through the egress proxy's control socket (docs/runner-protocol.md, "Egress").
function viaEgress(dir, host, port) {
  return new Promise((resolve, reject) => {
    const c = net.connect({ path: path.join(dir, 'control.sock') })
    let reply = ''
    let answered = false
    c.setEncoding('utf8')
    c.on('connect', () => c.write(`CONNECT ${host} ${port}\n`))
    c.on('data', (d) => {
      reply += d
      const end = reply.indexOf('\n')
      if (end < 0 || answered) return
      answered = true
      const line = reply.slice(0, end)
      c.destroy()
      if (!line.startsWith('OK ')) return reject(new Error(line))
      const s = net.connect({ path: path.join(dir, path.basename(line.slice(3).trim())) })
      s.once('connect', () => resolve(s))
      s.once('error', reject)
    })
    c.on('error', (e) => answered || reject(e))
    c.on('close', () => answered || reject(new Error('the egress proxy closed the request')))
  })
}
