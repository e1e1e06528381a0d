/**
 * The public mirror list decides what a client sees with the selection itself: a mirror is
 * listed only when `select()` ranks it for that client, and an outdated copy only when its
 * mirror would be ranked once it held the current version. No admin field is ever copied.
 */
import {expect} from 'chai'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {buildDocument} from '../../src/lib/metalink/document.js'
import {buildMirrorList, outdatedCopies, renderMirrorListHtml} from '../../src/lib/metalink/mirrorlist.js'
import {parseIp} from '../../src/lib/net.js'
import {type ClientInfo, compileMirror, compileSelectOptions, type SelectFile, type SelectMirror, select} from '../../src/lib/select/index.js'
import {mirrorRow, ROW_NOW} from '../helpers/mirror-row.js'

const NOW = ROW_NOW

function row(id: number, overrides: Partial<MirrorRow> = {}): MirrorRow {
  return mirrorRow(id, {
    identifier: `m${id}.example.org`,
    https_url: null,
    country: 'DE',
    http_up: undefined,
    https_up: undefined,
    status: undefined,
    country_only: false,
    region_only: false,
    as_only: false,
    prefix_only: false,
    fallback: false,
    admin: 'Admin Person',
    admin_email: 'admin-secret@example.org',
    comment: 'INTERNAL-NOTE',
    ...overrides,
  })
}

const options = compileSelectOptions({})
options.now = () => NOW

/** 1 public, 2 limited to 10.0.0.0/8 clients, 3 prefix_only for 10.1.0.0/16, 4 disabled; 5-7 stale copies: public, limited, disabled. */
const table = new Map<number, SelectMirror>(
  [
    row(1),
    row(2, {client_prefixes: ['10.0.0.0/8']}),
    row(3, {prefixes: ['10.1.0.0/16'], prefix_only: true, asn: 64500}),
    row(4, {enabled: false}),
    row(5),
    row(6, {client_prefixes: ['10.0.0.0/8']}),
    row(7, {enabled: false}),
  ].map((r) => [Number(r.id), compileMirror(r)]),
)
const file: SelectFile = {
  path: 'pub/big.iso',
  size: 65536,
  mtime: 1_700_000_000,
  mirrors: [1, 2, 3, 4],
  stale: new Map([
    [5, {size: 60000, mtime: null}],
    [6, {size: 60000, mtime: null}],
    [7, {size: 60000, mtime: null}],
  ]),
}

function listFor(ip: string) {
  const client: ClientInfo = {ip, address: parseIp(ip), country: 'DE', continent: 'EU', https: false}
  const selection = select(client, file, table, options, true)
  const outdated = outdatedCopies(file, selection, (f) => select(client, f, table, options, false))
  const doc = buildDocument({path: file.path, size: file.size, mtime: file.mtime, stored: null, hashesFresh: false, selection, baseUrl: 'http://mb.test/'})
  return buildMirrorList(doc, selection, client, outdated)
}

const identifiers = (list: ReturnType<typeof listFor>) => list.realms.flatMap((g) => g.mirrors.map((m) => m.identifier))

describe('public mirror list', () => {
  it('shows a client outside the restricted networks only the public mirror and the public outdated copy', () => {
    const list = listFor('192.0.2.7')
    expect(identifiers(list)).to.deep.equal(['m1.example.org'])
    expect(list.outdated.map((m) => [m.identifier, m.detail])).to.deep.equal([['m5.example.org', 'outdated copy: 60000 bytes, origin 65536']])
    const text = JSON.stringify(list) + renderMirrorListHtml(list)
    for (const hidden of ['m2.', 'm3.', 'm4.', 'm6.', 'm7.', '10.0.0.0', '10.1.0.0', '64500', 'admin-secret', 'INTERNAL-NOTE', 'Admin Person', 'score']) expect(text, hidden).not.to.include(hidden)
  })

  it('shows a client inside the networks the restricted mirrors, their outdated copy, and still no network', () => {
    const list = listFor('10.1.2.3')
    expect(list.realms.map((g) => [g.realm, g.mirrors.map((m) => m.identifier).sort()])).to.deep.equal([
      ['prefix', ['m3.example.org']],
      ['country', ['m1.example.org', 'm2.example.org']],
    ])
    expect(list.outdated.map((m) => m.identifier)).to.deep.equal(['m5.example.org', 'm6.example.org'])
    const text = JSON.stringify(list) + renderMirrorListHtml(list)
    for (const hidden of ['m4.', 'm7.', '10.0.0.0', '10.1.0.0', '64500', 'admin-secret', 'INTERNAL-NOTE']) expect(text, hidden).not.to.include(hidden)
  })

  it('gives the origin reason in public words, without the setting behind it', () => {
    const excludedClients = compileSelectOptions({exclude_clients: ['198.51.100.0/24']})
    const client: ClientInfo = {ip: '198.51.100.9', address: parseIp('198.51.100.9'), https: false}
    const selection = select(client, file, table, excludedClients, true)
    expect(selection.origin?.detail).to.include('198.51.100.0/24')
    const doc = buildDocument({path: file.path, size: file.size, mtime: file.mtime, stored: null, hashesFresh: false, selection, baseUrl: 'http://mb.test/'})
    const list = buildMirrorList(
      doc,
      selection,
      client,
      outdatedCopies(file, selection, () => selection),
    )
    expect(list.origin).to.deep.equal({reason: 'excluded_client', detail: 'downloads from your network are delivered by the origin'})
    expect(JSON.stringify(list)).not.to.include('198.51.100.0/24')
  })
})
