/**
 * The error catalogue (src/lib/errors.ts) against the code that throws: every code a throwing
 * site names is listed, every listed code is named somewhere, and exit codes follow the class.
 */
import {readdirSync, readFileSync} from 'node:fs'
import {join, relative} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {ERRORS, type ErrorCode, MbError, UsageError} from '../../src/lib/errors.js'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))
const CATALOGUE = join(SRC, 'lib', 'errors.ts')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

/** The text of the call whose `(` is at `open`, up to its matching `)` (quotes and template literals skipped). */
function callText(text: string, open: number): string {
  let depth = 0
  let quote: string | null = null
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (quote) {
      if (c === '\\') i++
      else if (c === quote) quote = null
      continue
    }
    if (c === "'" || c === '"' || c === '`') quote = c
    else if (c === '(') depth++
    else if (c === ')' && --depth === 0) return text.slice(open, i + 1)
  }
  return text.slice(open)
}

/** One code named at a throwing site. */
interface Thrown {
  code: string
  where: string
  usage: boolean
}

/**
 * The codes named where errors are made: `new MbError(…, {code: 'X'})` (also conditional
 * expressions), `new UsageError(…, 'X')`, and `super(…, {code: 'X'})` in subclasses.
 */
function thrownCodes(): Thrown[] {
  const found: Thrown[] = []
  for (const file of sourceFiles(SRC)) {
    if (file === CATALOGUE) continue
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(/\bnew (MbError|UsageError)\(|\bsuper\(/g)) {
      const open = match.index! + match[0].length - 1
      const call = callText(text, open)
      const where = `${relative(SRC, file)}:${text.slice(0, match.index).split('\n').length}`
      const usage = match[1] === 'UsageError'
      for (const option of call.matchAll(/\bcode:\s*([^,}]+)/g)) {
        for (const quoted of option[1].matchAll(/'([A-Z][A-Z0-9_]*)'/g)) found.push({code: quoted[1], where, usage})
      }
      const last = usage ? /,\s*'([A-Z][A-Z0-9_]*)',?\s*\)$/.exec(call) : null
      if (last) found.push({code: last[1], where, usage})
    }
  }
  return found
}

describe('error catalogue', () => {
  const thrown = thrownCodes()

  it('finds the throwing sites it checks', () => {
    expect(thrown.length).to.be.greaterThan(80)
    expect(thrown.map((t) => t.code)).to.include.members(['MIRROR_NOT_FOUND', 'SCAN_BASE_MISSING', 'GEOIP_NOT_FOUND', 'RSYNC_BAD_LISTING'])
  })

  it('lists every code thrown in src/', () => {
    const missing = thrown.filter((t) => !Object.hasOwn(ERRORS, t.code)).map((t) => `${t.code} (${t.where})`)
    expect(missing, 'codes thrown but not in src/lib/errors.ts').to.deep.equal([])
  })

  it('names every catalogue code somewhere in src/', () => {
    const text = sourceFiles(SRC)
      .filter((file) => file !== CATALOGUE)
      .map((file) => readFileSync(file, 'utf8'))
      .join('\n')
    const named = new Set(thrown.map((t) => t.code))
    // USAGE and FAILED are also the defaults of UsageError and MbError, and base-command names them.
    const unused = Object.keys(ERRORS).filter((code) => !named.has(code) && !text.includes(`'${code}'`))
    expect(unused, 'catalogue codes nothing uses').to.deep.equal([])
  })

  it('gives a UsageError only codes that exit 2', () => {
    const wrong = thrown.filter((t) => t.usage && ERRORS[t.code as ErrorCode]?.exit !== 2).map((t) => `${t.code} (${t.where})`)
    expect(wrong).to.deep.equal([])
  })

  it('takes the exit code and hint from the catalogue', () => {
    for (const [code, spec] of Object.entries(ERRORS)) {
      expect(spec.exit, code).to.be.oneOf([1, 2])
      expect(spec.hint, code).to.match(/^\S.*\.$/)
      const error = new MbError('message', {code: code as ErrorCode})
      expect(error.exitCode, code).to.equal(spec.exit)
      expect(error.hint, code).to.equal(spec.hint)
    }
    expect(new MbError('x').code).to.equal('FAILED')
    expect(new MbError('x').exitCode).to.equal(1)
    expect(new UsageError('x').code).to.equal('USAGE')
    expect(new UsageError('x', 'ROOT_INVALID').exitCode).to.equal(2)
  })
})
