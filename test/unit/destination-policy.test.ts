/** The address classification behind the webhook destination policy. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { nonPublicRange, publicOnlyLookup } from '../../src/webhooks/destination-policy.js'

describe('webhook destination policy', () => {
  it('names the range of every non-public address, IPv4-mapped IPv6 included', () => {
    const cases: [string, string][] = [
      ['127.0.0.1', 'loopback'],
      ['127.255.0.9', 'loopback'],
      ['10.0.0.1', 'private'],
      ['172.16.5.4', 'private'],
      ['192.168.1.1', 'private'],
      ['169.254.169.254', 'linkLocal'],
      ['100.64.1.1', 'carrierGradeNat'],
      ['0.0.0.0', 'unspecified'],
      ['224.0.0.251', 'multicast'],
      ['255.255.255.255', 'broadcast'],
      ['::1', 'loopback'],
      ['::', 'unspecified'],
      ['fe80::1', 'linkLocal'],
      ['fc00::1', 'uniqueLocal'],
      ['ff02::1', 'multicast'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:169.254.169.254', 'linkLocal'],
      ['::ffff:10.0.0.1', 'private'],
      ['64:ff9b::a00:1', 'rfc6052'],
      // IPv4-compatible (deprecated), as the URL parser writes [::127.0.0.1]; refused whatever it carries.
      ['::7f00:1', 'ipv4Compatible'],
      ['::a00:1', 'ipv4Compatible'],
      ['::808:808', 'ipv4Compatible'],
      ['::ffff:0:a00:1', 'rfc6145'],
      ['2002:a00:1::1', '6to4'],
      ['2002:808:808::1', '6to4'],
      ['64:ff9b:1::7f00:1', 'rfc6052'],
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
    ]
    for (const [address, range] of cases) assert.equal(nonPublicRange(address), range, address)
  })

  it('lets public unicast addresses through', () => {
    for (const address of ['93.184.215.14', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
      assert.equal(nonPublicRange(address), undefined, address)
  })

  it('refuses a name that resolves to loopback, in both of the forms net.connect asks for', async () => {
    for (const all of [false, true]) {
      const error = await new Promise<NodeJS.ErrnoException | null>((resolve) =>
        publicOnlyLookup('localhost', { all } as never, (e) => resolve(e)),
      )
      assert.equal(error?.code, 'EWEBHOOKDESTINATION')
      assert.match(error?.message ?? '', /localhost resolves to .*, a loopback address, is not public/)
    }
  })
})
