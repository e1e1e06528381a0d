import {expect} from 'chai'
import {compileSelectOptions} from '../../src/lib/select/index.js'
import {answerAttempt, answerMirror, parseRetrySecret, RetryMemory, type RetrySecret, retryKey, retrySecretText, startsDownload, tierSize} from '../../src/lib/select/retry.js'
import type {Candidate, Selection} from '../../src/lib/select/types.js'
import {Retries, selectionForAttempt} from '../../src/lib/serve/delivery/retry.js'

/** A fixed secret for the memory's keys. */
const SECRET: RetrySecret = [0x01234567, 0x89abcdef]

/** A clock the test moves, ms since the epoch. */
function clock(start = 1_800_000_000_000): {now: () => number; advance: (seconds: number) => void} {
  let t = start
  return {now: () => t, advance: (seconds) => (t += seconds * 1000)}
}

/** The (attempt, mirror) a memory recalls for `key`, or undefined. */
function recalled(m: RetryMemory, key: number): {attempt: number; mirrorId: number} | undefined {
  const v = m.recall(key)
  return v < 0 ? undefined : {attempt: answerAttempt(v), mirrorId: answerMirror(v)}
}

describe('retries: the memory of recent answers', () => {
  it('recalls an answer within the window and forgets it after', () => {
    const c = clock()
    const m = new RetryMemory(600, 1000, c.now)
    m.remember(retryKey('192.0.2.1', 'iso/a.iso', SECRET), 2, 7)
    expect(recalled(m, retryKey('192.0.2.1', 'iso/a.iso', SECRET))).to.deep.equal({attempt: 2, mirrorId: 7})
    expect(recalled(m, retryKey('192.0.2.2', 'iso/a.iso', SECRET)), 'another client').to.equal(undefined)
    expect(recalled(m, retryKey('192.0.2.1', 'iso/b.iso', SECRET)), 'another path').to.equal(undefined)
    expect(recalled(m, retryKey('192.0.2.1 iso/a.is', 'o', SECRET)), 'where the two meet is part of the key').to.equal(undefined)
    c.advance(599)
    expect(recalled(m, retryKey('192.0.2.1', 'iso/a.iso', SECRET))?.attempt).to.equal(2)
    c.advance(1)
    expect(recalled(m, retryKey('192.0.2.1', 'iso/a.iso', SECRET)), 'after the window').to.equal(undefined)
  })

  it('holds at most its bound, forgetting the oldest answers first', () => {
    const c = clock()
    const m = new RetryMemory(600, 128, c.now)
    const key = (i: number) => retryKey(`10.0.${i >> 8}.${i & 255}`, 'f', SECRET)
    for (let i = 0; i < 1000; i++) {
      m.remember(key(i), 1, 1)
      if (i % 100 === 99) c.advance(1)
    }
    expect(m.size).to.be.at.most(128)
    expect(m.size, 'the table fills').to.be.at.least(100)
    expect(recalled(m, key(999)), 'the newest').to.deep.equal({attempt: 1, mirrorId: 1})
    let old = 0
    for (let i = 0; i < 500; i++) if (m.recall(key(i)) >= 0) old++
    expect(old, 'the oldest half is forgotten').to.equal(0)
  })

  it('an expired answer frees its slot without timers', () => {
    const c = clock()
    const m = new RetryMemory(10, 16, c.now)
    for (let i = 0; i < 16; i++) m.remember(retryKey(`10.0.0.${i}`, 'f', SECRET), 1, 1)
    c.advance(10)
    expect(m.size).to.equal(0)
    m.remember(retryKey('10.0.1.1', 'f', SECRET), 1, 1)
    expect(m.size).to.equal(1)
  })

  it('a sibling’s answer does not move a later attempt back', () => {
    const m = new RetryMemory(600, 1000, clock().now)
    const k = retryKey('192.0.2.1', 'a', SECRET)
    m.remember(k, 3, 5)
    m.merge(k, 2, 4)
    expect(recalled(m, k)).to.deep.equal({attempt: 3, mirrorId: 5})
    m.merge(k, 4, 6)
    expect(recalled(m, k)).to.deep.equal({attempt: 4, mirrorId: 6})
  })

  it('a Range from byte 0 starts a download, a continuation does not', () => {
    expect(startsDownload(undefined)).to.equal(true)
    expect(startsDownload('bytes=0-')).to.equal(true)
    expect(startsDownload('bytes=0-1023')).to.equal(true)
    expect(startsDownload('bytes=1024-')).to.equal(false)
    expect(startsDownload('bytes=-500')).to.equal(false)
  })
})

describe('retries: the steps of one client', () => {
  const options = compileSelectOptions({retry_window_seconds: 600})

  it('a repeat moves on; a continuation range and a HEAD stay; a Range from 0 moves on', () => {
    const r = new Retries(options, clock().now)
    const first = r.step('192.0.2.1', 'a.iso', 'GET', undefined)!
    expect(first).to.include({attempt: 1, advance: true, retriedFrom: 0})
    r.answered(first, 11)
    const resumed = r.step('192.0.2.1', 'a.iso', 'GET', 'bytes=5000-')!
    expect(resumed, 'continuation').to.include({attempt: 1, advance: false})
    r.answered(resumed, 11)
    expect(r.step('192.0.2.1', 'a.iso', 'HEAD', undefined), 'HEAD').to.include({attempt: 1, advance: false})
    expect(r.step('192.0.2.1', 'a.iso', 'GET', undefined, undefined, true), 'a conditional GET revalidates, it does not retry').to.include({attempt: 1, advance: false})
    const again = r.step('192.0.2.1', 'a.iso', 'GET', undefined)!
    expect(again, 'a repeat').to.include({attempt: 2, advance: true, retriedFrom: 11})
    r.answered(again, 12)
    expect(r.step('192.0.2.1', 'a.iso', 'GET', 'bytes=100-'), 'continuation after the retry').to.include({attempt: 2})
    expect(r.step('192.0.2.1', 'a.iso', 'GET', 'bytes=0-'), 'a Range from 0: a new attempt, the window’s signal already taken').to.include({attempt: 3, retriedFrom: 0})
    expect(r.step('192.0.2.9', 'a.iso', 'GET', undefined), 'another client of the network').to.include({attempt: 1})
  })

  it('the window expires, and 0 turns retries off', () => {
    const c = clock()
    const r = new Retries(options, c.now)
    r.answered(r.step('192.0.2.1', 'a.iso', 'GET', undefined)!, 1)
    c.advance(601)
    expect(r.step('192.0.2.1', 'a.iso', 'GET', undefined)).to.include({attempt: 1, retriedFrom: 0})
    r.configure(compileSelectOptions({retry_window_seconds: 0}))
    expect(r.enabled).to.equal(false)
    expect(r.step('192.0.2.1', 'a.iso', 'GET', undefined)).to.equal(undefined)
  })

  it('tells a listener of each answer remembered (the --workers sharing)', () => {
    const r = new Retries(options, clock().now, SECRET)
    const heard: unknown[] = []
    r.onRemember((key, attempt, mirrorId, signalled) => heard.push([key, attempt, mirrorId, signalled]))
    r.answered(r.step('192.0.2.1', 'a.iso', 'GET', undefined)!, 3)
    r.answered(r.step('192.0.2.1', 'a.iso', 'GET', 'bytes=9-')!, 3)
    expect(heard).to.deep.equal([[retryKey('192.0.2.1', 'a.iso', SECRET), 1, 3, false]])
    const sibling = new Retries(options, clock().now, SECRET)
    sibling.merge(retryKey('192.0.2.1', 'a.iso', SECRET), 1, 3)
    expect(sibling.step('192.0.2.1', 'a.iso', 'GET', undefined)).to.include({attempt: 2, retriedFrom: 3})
  })

  it('attempt N takes the N-th mirror of the tier, cycling, never the origin', () => {
    const ranked = [1, 2, 3, 4].map((id) => ({mirror: {id}, realm: id <= 3 ? 'country' : 'world', rank: id, url: `u${id}`}) as unknown as Candidate)
    const selection: Selection = {realm: 'country', ranked, excluded: []}
    expect(selectionForAttempt(selection, 1)).to.equal(selection)
    expect(selectionForAttempt(selection, 2).ranked.map((c) => c.url)).to.deep.equal(['u2', 'u3', 'u4', 'u1'])
    expect(selectionForAttempt(selection, 3).ranked.map((c) => c.url)).to.deep.equal(['u3', 'u4', 'u1', 'u2'])
    expect(selectionForAttempt(selection, 4), 'then over again, still in the tier').to.equal(selection)
    for (let a = 1; a <= 300; a++) expect(selectionForAttempt(selection, a).realm).to.equal('country')
  })

  it('a tier of one mirror widens to the next pool; an empty ranking has none', () => {
    const r = (realms: string[]) => realms.map((realm) => ({realm}))
    expect(tierSize(r(['country', 'country', 'continent']))).to.equal(2)
    expect(tierSize(r(['country', 'continent', 'continent', 'world']))).to.equal(3)
    expect(tierSize(r(['prefix']))).to.equal(1)
    expect(tierSize([])).to.equal(0)
  })

  it('the retry signal counts once per address, path and window, however often it asks', () => {
    const c = clock()
    const r = new Retries(options, c.now, SECRET)
    let signals = 0
    let last = r.step('192.0.2.1', 'a.iso', 'GET', undefined)!
    r.answered(last, 1)
    for (let i = 0; i < 200; i++) {
      c.advance(1)
      last = r.step('192.0.2.1', 'a.iso', 'GET', undefined)!
      if (last.retriedFrom !== 0) signals++
      r.answered(last, 1 + (i % 3))
    }
    expect(signals, 'once within the window').to.equal(1)
    c.advance(600)
    r.answered(r.step('192.0.2.1', 'a.iso', 'GET', undefined)!, 1)
    expect(r.step('192.0.2.1', 'a.iso', 'GET', undefined)?.retriedFrom, 'after the window: again').to.equal(1)
  })

  it('a sibling that took the signal keeps the others from taking it again', () => {
    const a = new Retries(options, clock().now, SECRET)
    const b = new Retries(options, clock().now, SECRET)
    a.onRemember((key, attempt, mirrorId, signalled) => b.merge(key, attempt, mirrorId, signalled))
    a.answered(a.step('192.0.2.1', 'a.iso', 'GET', undefined)!, 1)
    const retry = a.step('192.0.2.1', 'a.iso', 'GET', undefined)!
    expect(retry.retriedFrom).to.equal(1)
    a.answered(retry, 2)
    expect(b.step('192.0.2.1', 'a.iso', 'GET', undefined)).to.include({attempt: 3, retriedFrom: 0})
  })

  it('keys are hashed under a secret: another secret, other keys', () => {
    const other: RetrySecret = [0x01234567, 0x89abcdee]
    expect(retryKey('192.0.2.1', 'a.iso', SECRET)).to.not.equal(retryKey('192.0.2.1', 'a.iso', other))
    expect(retryKey('192.0.2.1', 'a.iso', SECRET)).to.equal(retryKey('192.0.2.1', 'a.iso', SECRET))
    expect(parseRetrySecret(retrySecretText(SECRET))).to.deep.equal(SECRET)
    expect(parseRetrySecret('xyz')).to.equal(undefined)
    expect(new Retries(options).secret, 'a fresh secret by default').to.not.deep.equal(new Retries(options).secret)
    const worker = new Retries(options)
    worker.adoptSecret(SECRET)
    expect([worker.secret, worker.enabled], 'a worker takes its primary’s').to.deep.equal([SECRET, true])
  })
})
