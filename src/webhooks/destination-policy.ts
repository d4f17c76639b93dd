import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'

/** Set on the error a refused destination fails with, so it can be told from a network error. */
export const DESTINATION_REFUSED = 'EWEBHOOKDESTINATION'

const ALLOW_HINT = 'set WEBHOOK_ALLOW_PRIVATE=true to allow non-public destinations'

/** RFC 4291's deprecated IPv4-compatible IPv6 addresses, which ipaddr.js calls unicast. */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96')

/**
 * The ipaddr.js range of an address that is not public (`loopback`, `private`, `linkLocal`,
 * `carrierGradeNat`, `uniqueLocal`, ...), or undefined for a public unicast one. An IPv4-mapped
 * IPv6 address is judged as the IPv4 address it carries; the ranges that embed an IPv4 address
 * otherwise (IPv4-compatible `::/96`, 6to4, NAT64, Teredo, SIIT) are refused whole, whatever they
 * carry; anything ipaddr.js cannot parse is refused.
 */
export function nonPublicRange(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return 'unparsable'
  const parsed = ipaddr.process(address)
  const range = parsed.range()
  if (range === 'unicast' && parsed.kind() === 'ipv6' && parsed.match(IPV4_COMPATIBLE))
    return 'ipv4Compatible'
  return range === 'unicast' ? undefined : range
}

/** Why a destination address is refused, or undefined when it is public. */
export function refusalFor(address: string, host: string = address): string | undefined {
  const range = nonPublicRange(address)
  if (range === undefined) return undefined
  const where = host === address ? address : `${host} resolves to ${address}`
  return `destination refused: ${where}, a ${range} address, is not public; ${ALLOW_HINT}`
}

/**
 * A host written as an IP address (after the URL parser's normalisation, so `2130706433` and
 * `0x7f.1` are 127.0.0.1) is judged as written; so is `localhost`, which is always loopback.
 */
const unbracketed = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1')

/** Why a subscriber URL is refused as it is written, or undefined when only DNS can tell. */
export function literalRefusal(url: URL): string | undefined {
  const host = unbracketed(url)
  if (isIP(host)) return refusalFor(host)
  if (/(?:^|\.)localhost\.?$/i.test(host)) return refusalFor('127.0.0.1', host)
  return undefined
}

const refused = (message: string) => Object.assign(new Error(message), { code: DESTINATION_REFUSED })

/**
 * A `lookup` for node:net that resolves as usual, then refuses the connection when any address is
 * not public: the socket connects to the very address checked, so a name that resolves elsewhere
 * later (DNS rebinding) gains nothing. Node skips `lookup` for literal addresses; check those first.
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  const all: LookupAllOptions = { ...options, all: true }
  dnsLookup(hostname, all, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error, '', 0)
    const bad = addresses.find((entry) => nonPublicRange(entry.address) !== undefined)
    if (bad) return callback(refused(refusalFor(bad.address, hostname) as string), '', 0)
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses)
    const first = addresses[0] as LookupAddress
    callback(null, first.address, first.family)
  })
}

/**
 * The error a send fails with before connecting, when its URL is a non-public IP address. A name,
 * `localhost` too, is judged by publicOnlyLookup on what it resolves to.
 */
export function refusedLiteral(url: URL): Error | undefined {
  const host = unbracketed(url)
  const reason = isIP(host) ? refusalFor(host) : undefined
  return reason === undefined ? undefined : refused(reason)
}
