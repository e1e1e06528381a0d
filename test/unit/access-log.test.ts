/**
 * The access log: Apache combined format lines (+ mirror and realm), escaping that keeps one
 * request on one line, buffered writes to a file, and reopening on SIGHUP (logrotate).
 */
import {existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {apacheTime, escapeLogField, escapeWireField, formatAccessLine, openAccessLog} from '../../src/lib/operator/access-log.js'
import type {RequestOutcome} from '../../src/lib/serve/delivery/outcome.js'

/** Apache combined format (httpd's mod_log_config "combined") plus two quoted fields. */
const COMBINED =
  /^(\S+) (\S+) (\S+) \[(\d{2})\/(\w{3})\/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-]\d{4})\] "((?:[^"\\]|\\.)*)" (\d{3}) (\d+|-) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"$/

const base: RequestOutcome = {
  time: Date.UTC(2026, 9, 10, 13, 55, 36),
  method: 'GET',
  target: '/iso/big.iso',
  path: 'iso/big.iso',
  httpVersion: '1.1',
  status: 302,
  outcome: 'redirect',
  mirrorId: 1,
  mirrorIdentifier: 'ftp.example.de',
  realm: 'country',
  clientIp: '2001:db8::1',
  country: 'DE',
  bytesSent: 0,
  fileSize: 1000,
  userAgent: 'Wget/1.21',
  referer: 'https://example.org/',
  durationSeconds: 0.0002,
}

describe('access log', () => {
  it('formats the time as %t in UTC', () => {
    expect(apacheTime(Date.UTC(2000, 9, 10, 13, 55, 36))).to.equal('[10/Oct/2000:13:55:36 +0000]')
    expect(apacheTime(Date.UTC(2026, 0, 1, 0, 0, 0))).to.equal('[01/Jan/2026:00:00:00 +0000]')
  })

  it('writes combined format with the mirror and realm appended', () => {
    expect(formatAccessLine(base)).to.equal('2001:db8::1 - - [10/Oct/2026:13:55:36 +0000] "GET /iso/big.iso HTTP/1.1" 302 - "https://example.org/" "Wget/1.21" "ftp.example.de" "country"')
    const local = formatAccessLine({...base, status: 200, outcome: 'local', mirrorId: undefined, mirrorIdentifier: undefined, realm: null, bytesSent: 1000, userAgent: undefined, referer: undefined})
    expect(local).to.equal('2001:db8::1 - - [10/Oct/2026:13:55:36 +0000] "GET /iso/big.iso HTTP/1.1" 200 1000 "-" "-" "-" "-"')
    expect(local).to.match(COMBINED)
  })

  it('escapes quotes, backslashes, control and non-ASCII bytes so a line cannot be forged', () => {
    expect(escapeLogField('a"b\\c')).to.equal('a\\"b\\\\c')
    expect(escapeLogField('x\ny\tz')).to.equal('x\\x0ay\\x09z')
    expect(escapeLogField('ü')).to.equal('\\xc3\\xbc')
    const evil = formatAccessLine({...base, userAgent: 'evil"\n1.2.3.4 - - [01/Jan/2000:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-', target: '/a b"c'})
    expect(evil.split('\n')).to.have.length(1)
    const m = COMBINED.exec(evil)!
    expect(m).to.not.equal(null)
    expect(m[11]).to.equal('GET /a b\\"c HTTP/1.1')
  })

  it('writes wire bytes (request line, headers) faithfully: each byte received as itself or \\xhh', () => {
    // node hands header values over as latin1: one character per byte on the wire.
    const utf8Sent = Buffer.from('ü€😀', 'utf8').toString('latin1')
    expect(escapeWireField(utf8Sent)).to.equal('\\xc3\\xbc\\xe2\\x82\\xac\\xf0\\x9f\\x98\\x80')
    expect(escapeWireField(Buffer.from([0x61, 0xfc, 0xff, 0x80, 0x62]).toString('latin1'))).to.equal('a\\xfc\\xff\\x80b')
    let every = ''
    for (let byte = 0; byte < 256; byte++) every += String.fromCharCode(byte)
    const escaped = escapeWireField(every)
    expect(escaped).to.match(/^[\x20-\x7e]*$/)
    // Every byte comes back from the escaped text: the log holds exactly what was sent.
    const back = escaped.replace(/\\x([0-9a-f]{2})|\\(["\\])/g, (_m, hex, char) => (hex ? String.fromCharCode(Number.parseInt(hex, 16)) : char))
    expect(back).to.equal(every)
    // Characters no wire can carry (from a caller, not from node): their UTF-8 bytes.
    expect(escapeWireField('€\uD800')).to.equal('\\xe2\\x82\\xac\\xef\\xbf\\xbd')
    const line = formatAccessLine({...base, userAgent: Buffer.from('agent/ü\r\n', 'utf8').toString('latin1'), referer: '\u0000\u001b[31m', mirrorIdentifier: 'mïrror😀\uDC00'})
    expect(line).to.match(COMBINED)
    expect(line).to.contain('"\\x00\\x1b[31m" "agent/\\xc3\\xbc\\x0d\\x0a" "m\\xc3\\xafrror\\xf0\\x9f\\x98\\x80\\xef\\xbf\\xbd"')
  })

  it("creates the file 0640 whatever the umask, and leaves an existing file's mode alone", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-access-log-'))
    const old = process.umask()
    try {
      for (const umask of [0, 0o077, 0o022]) {
        process.umask(umask)
        const file = join(dir, `access-${umask}.log`)
        const log = openAccessLog(file, {flushMs: 20, reopenOnSighup: false})
        log.observer({...base})
        await log.flush()
        await log.close()
        expect(statSync(file).mode & 0o777, `umask ${umask.toString(8)}`).to.equal(0o640)
      }
      const existing = join(dir, 'existing.log')
      writeFileSync(existing, '', {mode: 0o600})
      const log = openAccessLog(existing, {flushMs: 20, reopenOnSighup: false})
      log.observer({...base})
      await log.close()
      expect(statSync(existing).mode & 0o777).to.equal(0o600)
    } finally {
      process.umask(old)
      rmSync(dir, {recursive: true, force: true})
    }
  })

  it('reopens its file by itself when a rotation renames or removes it, losing no line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-access-log-'))
    const file = join(dir, 'access.log')
    const log = openAccessLog(file, {flushMs: 20, reopenOnSighup: false})
    try {
      for (let i = 0; i < 10; i++) log.observer({...base, target: `/before${i}`})
      await log.flush()
      renameSync(file, `${file}.1`) // no SIGHUP: the reload after the rotation failed
      for (let i = 0; i < 10; i++) log.observer({...base, target: `/during${i}`})
      const since = Date.now()
      while (!existsSync(file) && Date.now() - since < 5000) await sleep(50)
      for (let i = 0; i < 10; i++) log.observer({...base, target: `/after${i}`})
      await log.flush()
      const rotated = readFileSync(`${file}.1`, 'utf8').trim().split('\n')
      const current = readFileSync(file, 'utf8').trim().split('\n')
      expect(rotated.length + current.length).to.equal(30)
      expect(current.filter((l) => l.includes('/after'))).to.have.length(10)
      expect(rotated.filter((l) => l.includes('/after'))).to.have.length(0)
      rmSync(file) // removed outright: created again
      const removed = Date.now()
      while (!existsSync(file) && Date.now() - removed < 5000) await sleep(50)
      expect(existsSync(file)).to.equal(true)
      expect(log.dropped).to.equal(0)
    } finally {
      await log.close()
      rmSync(dir, {recursive: true, force: true})
    }
  })

  it('buffers lines, writes them asynchronously to the file, and reopens it on SIGHUP', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-access-log-'))
    const file = join(dir, 'access.log')
    const log = openAccessLog(file, {flushMs: 20})
    try {
      for (let i = 0; i < 100; i++) log.observer({...base, target: `/f${i}`})
      expect(existsSync(file) ? readFileSync(file, 'utf8') : '').to.equal('') // nothing written synchronously
      await log.flush()
      let lines = readFileSync(file, 'utf8').trim().split('\n')
      expect(lines).to.have.length(100)
      for (const line of lines) expect(line).to.match(COMBINED)
      expect(lines[99]).to.contain('"GET /f99 HTTP/1.1"')

      // logrotate: move the file away, send SIGHUP, new lines go to a new file
      renameSync(file, `${file}.1`)
      process.kill(process.pid, 'SIGHUP')
      await sleep(50)
      log.observer({...base, target: '/after-rotate'})
      await log.flush()
      await sleep(50)
      lines = readFileSync(file, 'utf8').trim().split('\n')
      expect(lines).to.have.length(1)
      expect(lines[0]).to.contain('/after-rotate')
      expect(readFileSync(`${file}.1`, 'utf8').trim().split('\n')).to.have.length(100)

      // the periodic flush writes without an explicit flush()
      log.observer({...base, target: '/timer'})
      await sleep(200)
      expect(readFileSync(file, 'utf8')).to.contain('/timer')
      expect(log.dropped).to.equal(0)
    } finally {
      await log.close()
      rmSync(dir, {recursive: true, force: true})
    }
    expect(process.listenerCount('SIGHUP')).to.equal(0)
  })
})
