// The URL policy of src/headwater/domain/urls.py (`address_refusal`, `allowed_addresses`,
// `literal_address`, `unusual_spelling`), ported to JS for the AWS runner's egress proxy
// (lambda-egress.mjs): the same rules, the same sentences. Python's `ipaddress` (3.11) tables are
// copied here; tests/e2e/aws/test_lambda_egress.py runs one list of addresses through both.
// Pure: resolving a name is the caller's I/O, passed in as a function.
import net from 'node:net'

const V4 = 4
const V6 = 6
const PART = /^(?:0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$/
const MASK32 = 0xffffffffn

// An address: {version, value (BigInt)}.
const v4 = (value) => ({ version: V4, value: BigInt(value) })

function parseV4(text) {
  const parts = text.split('.')
  if (parts.length !== 4) return null
  let value = 0n
  for (const p of parts) {
    if (!/^[0-9]{1,3}$/.test(p) || (p.length > 1 && p[0] === '0') || Number(p) > 255) return null
    value = (value << 8n) | BigInt(p)
  }
  return v4(value)
}

function parseV6(text) {
  if (!net.isIPv6(text) || text.includes('%')) return null
  let head = text
  let tail = []
  const lastColon = text.lastIndexOf(':')
  if (text.slice(lastColon + 1).includes('.')) {
    const inner = parseV4(text.slice(lastColon + 1))
    if (!inner) return null
    tail = [Number(inner.value >> 16n), Number(inner.value & 0xffffn)]
    head = text.slice(0, lastColon + 1)
    if (!head.endsWith('::')) head = head.slice(0, -1) // "::1.2.3.4" keeps its "::"
  }
  const hex = (s) => (s === '' ? [] : s.split(':').map((h) => parseInt(h, 16)))
  let hextets
  const gap = head.indexOf('::')
  if (gap >= 0) {
    const hi = hex(head.slice(0, gap))
    const lo = [...hex(head.slice(gap + 2)), ...tail]
    hextets = [...hi, ...new Array(8 - hi.length - lo.length).fill(0), ...lo]
  } else hextets = [...hex(head), ...tail]
  if (hextets.length !== 8) return null
  return { version: V6, value: hextets.reduce((a, h) => (a << 16n) | BigInt(h), 0n) }
}

// Python's ipaddress.ip_address.
function ipAddress(text) {
  return parseV4(text) || parseV6(text)
}

// C's inet_aton: 1 to 4 parts, each decimal, octal (0177) or hex (0x7f), the last filling the rest.
export function inetAton(host) {
  const parts = host.split('.')
  if (parts.length < 1 || parts.length > 4 || !parts.every((p) => PART.test(p))) return null
  const values = []
  for (const p of parts) {
    if (p.length > 1 && p[0] === '0' && p[1] !== 'x' && p[1] !== 'X') values.push(BigInt('0o' + p.slice(1)))
    else if (/^0[xX]$/.test(p)) return null
    else values.push(BigInt(p))
  }
  const last = values.pop()
  if (values.some((v) => v > 255n) || last >= 256n ** BigInt(4 - values.length)) return null
  let number = last
  values.forEach((v, i) => (number += v << BigInt(8 * (3 - i))))
  return v4(number)
}

export function literalAddress(host) {
  let text = host.trim()
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1)
  return ipAddress(text.split('%', 1)[0]) || inetAton(text)
}

export function unusualSpelling(host) {
  const text = host.trim()
  const addr = inetAton(text)
  return addr !== null && str(addr) !== text
}

// Python's str(): dotted quad, or IPv6 with the longest run of two or more zero hextets as '::'.
export function str(addr) {
  if (addr.version === V4) return [24n, 16n, 8n, 0n].map((s) => String((addr.value >> s) & 0xffn)).join('.')
  const hextets = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => Number((addr.value >> s) & 0xffffn).toString(16))
  let best = -1
  let bestLen = 0
  let start = -1
  hextets.forEach((h, i) => {
    if (h === '0') {
      if (start < 0) start = i
      if (i - start + 1 > bestLen) [best, bestLen] = [start, i - start + 1]
    } else start = -1
  })
  if (bestLen > 1) {
    const out = [...hextets.slice(0, best), '', ...hextets.slice(best + bestLen)]
    if (best + bestLen === 8) out.push('')
    if (best === 0) out.unshift('')
    return out.join(':')
  }
  return hextets.join(':')
}

function network(text) {
  const [address, bits] = text.split('/')
  const addr = ipAddress(address)
  const width = addr.version === V4 ? 32n : 128n
  return { version: addr.version, value: addr.value, shift: width - BigInt(bits) }
}

const within = (addr, net) => addr.version === net.version && (addr.value >> net.shift) === (net.value >> net.shift)
const nets = (list) => list.map(network)

// Python 3.11's ipaddress constants.
const V4_LOOPBACK = network('127.0.0.0/8')
const V4_LINK_LOCAL = network('169.254.0.0/16')
const V4_MULTICAST = network('224.0.0.0/4')
const V4_RESERVED = network('240.0.0.0/4')
const V4_SHARED = network('100.64.0.0/10') // is_global's "public network" exception (CGNAT)
const V4_PRIVATE = nets(['0.0.0.0/8', '10.0.0.0/8', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/29',
  '192.0.0.170/31', '192.0.2.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24',
  '240.0.0.0/4', '255.255.255.255/32'])
const V6_LINK_LOCAL = network('fe80::/10')
const V6_MULTICAST = network('ff00::/8')
const V6_PRIVATE = nets(['::1/128', '::/128', '::ffff:0:0/96', '100::/64', '2001::/23', '2001:2::/48', '2001:db8::/32',
  '2001:10::/28', 'fc00::/7', 'fe80::/10'])
const V6_RESERVED = nets(['::/8', '100::/8', '200::/7', '400::/6', '800::/5', '1000::/4', '4000::/3', '6000::/3',
  '8000::/3', 'a000::/3', 'c000::/3', 'e000::/4', 'f000::/5', 'f800::/6', 'fe00::/9'])
const SIX_TO_FOUR = network('2002::/16')
const NAT64 = nets(['64:ff9b::/96', '64:ff9b:1::/48'])
const IPV4_COMPATIBLE = network('::/96')

const mapped = (a) => ((a.value >> 32n) === 0xffffn ? v4(a.value & MASK32) : null)

function is(addr) {
  if (addr.version === V4) {
    const priv = V4_PRIVATE.some((n) => within(addr, n))
    return {
      loopback: within(addr, V4_LOOPBACK), unspecified: addr.value === 0n, multicast: within(addr, V4_MULTICAST),
      reserved: within(addr, V4_RESERVED), linkLocal: within(addr, V4_LINK_LOCAL), private: priv,
      global: !within(addr, V4_SHARED) && !priv,
    }
  }
  const inner = mapped(addr)
  const priv = inner ? is(inner).private : V6_PRIVATE.some((n) => within(addr, n))
  return {
    loopback: addr.value === 1n, unspecified: addr.value === 0n, multicast: within(addr, V6_MULTICAST),
    reserved: V6_RESERVED.some((n) => within(addr, n)), linkLocal: within(addr, V6_LINK_LOCAL), private: priv,
    global: !priv,
  }
}

function embeddedV4(addr) {
  const found = []
  if (within(addr, SIX_TO_FOUR)) found.push(v4((addr.value >> 80n) & MASK32))
  if (NAT64.some((n) => within(addr, n))) found.push(v4(addr.value & MASK32))
  if ((addr.value >> 96n) === 0x20010000n) found.push(v4((addr.value >> 64n) & MASK32), v4(~addr.value & MASK32))
  return found
}

// Why the policy refuses an address (a phrase such as "a private address"), or null.
export function addressRefusal(addr, allowLoopback, allowPrivate) {
  if (addr.version === V6) {
    if (mapped(addr)) return 'an IPv4-mapped IPv6 address'
    if (within(addr, IPV4_COMPATIBLE) && addr.value > 1n) return 'an IPv4-compatible IPv6 address'
    for (const inner of embeddedV4(addr)) {
      if (addressRefusal(inner, allowLoopback, allowPrivate)) return `an IPv6 address that embeds ${str(inner)}`
    }
  }
  const a = is(addr)
  if (a.loopback || a.unspecified) return allowLoopback ? null : a.loopback ? 'a loopback address' : 'the unspecified address'
  if (a.multicast || a.reserved || a.linkLocal || a.private || !a.global) {
    return allowPrivate ? null : 'a private, link-local or reserved address'
  }
  return null
}

export class Refused extends Error {}
export class Unresolved extends Refused {}

// The addresses to connect to for `host` (`resolve`: async host -> [address], called once),
// every one checked; throws Refused (Unresolved for a name that does not resolve) saying why.
// `allow(addr)`: {loopback, private} for that address (the Lambda's test-only loopback ports).
export async function allowedAddresses(host, resolve, allow) {
  if (unusualSpelling(host)) {
    throw new Refused(`refused by policy: ${host} is an unusual spelling of the address ${str(inetAton(host.trim()))}`)
  }
  const literal = literalAddress(host)
  if (literal) {
    const problem = addressRefusal(literal, ...allow(literal))
    if (problem) throw new Refused(`refused by policy: ${str(literal)} is ${problem}`)
    return [str(literal)]
  }
  let addresses
  try {
    addresses = [...new Set(await resolve(host))]
  } catch {
    throw new Unresolved(`the host ${host} does not resolve`)
  }
  if (!addresses.length) throw new Unresolved(`the host ${host} does not resolve`)
  for (const address of addresses) {
    const addr = literalAddress(address)
    const problem = addr === null ? 'not an address' : addressRefusal(addr, ...allow(addr))
    if (problem) throw new Refused(`refused by policy: ${host} resolves to ${address}, ${problem}`)
  }
  return addresses
}
