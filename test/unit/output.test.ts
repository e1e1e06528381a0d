/**
 * Human output of tables and records (src/lib/output.ts): values come from the origin's file
 * names and the registry, and are printed to an operator's terminal, so control characters
 * are shown, never sent.
 */
import {expect} from 'chai'
import {renderRecord, renderTable} from '../../src/lib/output.js'

describe('human output', () => {
  const name = 'esc\u001b]0;pwned\u0007\u001b[2J\tcol\rret\u009bcsi\u007fdel.iso'
  const shown = 'esc\\x1b]0;pwned\\x07\\x1b[2J\\x09col\\x0dret\\x9bcsi\\x7fdel.iso'

  it('writes control characters in table cells as \\xHH, on a terminal and in tab-separated lines', () => {
    const columns = [
      {header: 'path', get: (r: {path: string; size: number}) => r.path},
      {header: 'size', get: (r: {path: string; size: number}) => r.size},
    ]
    const plain = renderTable([{path: name, size: 2}], columns, false)
    expect(plain).to.equal(`path\tsize\n${shown}\t2`)
    const boxed = renderTable([{path: name, size: 2}], columns, true, Number.POSITIVE_INFINITY)
    expect(boxed).to.contain(shown)
    expect([...boxed].filter((c) => c !== '\n' && (c < ' ' || (c >= '\u007f' && c <= '\u009f')))).to.deep.equal([])
  })

  it('writes them so in records and lists too, and keeps ordinary text, UTF-8 and line breaks as they are', () => {
    expect(renderRecord([['path', name]])).to.equal(`path: ${shown}`)
    expect(renderRecord([['names', [name, 'b']]])).to.equal(`names: ${shown},b`)
    expect(renderRecord([['note', 'ü dir/a b.iso\nsecond line']])).to.equal('note: ü dir/a b.iso\nsecond line')
  })
})
