import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {checkLayers} from '../../scripts/layers.js'

/** The layer check of `npm run lint` (scripts/layers.ts) on small trees written for each case. */
describe('the layer check (scripts/layers.ts)', () => {
  const LAYERS = [['lib'], ['lib/low'], ['lib/high', 'lib/side'], ['commands/**']]
  let root: string

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'mb-layers-'))
  })

  afterEach(() => {
    rmSync(root, {recursive: true, force: true})
  })

  /** Writes `files` (path → source) under the tree's root. */
  function tree(files: Record<string, string>): void {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), {recursive: true})
      writeFileSync(join(root, path), text)
    }
  }

  it('passes imports that go down the layers or stay in their folder', () => {
    tree({
      'lib/text.ts': 'export const a = 1\n',
      'lib/low/a.ts': "import {a} from '../text.js'\nexport const b = a\n",
      'lib/low/b.ts': "import {b} from './a.js'\nexport const c = b\n",
      'lib/high/x.ts': "import type {c} from '../low/b.js'\nexport const d: typeof c = 1\n",
      'commands/mirror/add.ts': "import {d} from '../../lib/high/x.js'\nexport default d\n",
    })
    expect(checkLayers(root, LAYERS)).to.deep.equal([])
  })

  it('reports an import of a higher layer, type-only ones too', () => {
    tree({
      'lib/low/a.ts': "import type {X} from '../high/x.js'\nexport type Y = X\n",
      'lib/high/x.ts': 'export type X = number\n',
    })
    const problems = checkLayers(root, LAYERS)
    expect(problems).to.have.length(1)
    expect(problems[0].file).to.equal('lib/low/a.ts')
    expect(problems[0].message).to.contain('imports lib/high/x.ts from a higher layer')
  })

  it('reports an import between folders of the same layer, and a folder in no layer', () => {
    tree({
      'lib/high/x.ts': "import {s} from '../side/s.js'\nexport const x = s\n",
      'lib/side/s.ts': 'export const s = 1\n',
      'lib/stray/t.ts': 'export const t = 1\n',
    })
    const messages = checkLayers(root, LAYERS).map((p) => p.message)
    expect(messages).to.have.length(2)
    expect(messages[0]).to.contain('from a folder of the same layer')
    expect(messages[1]).to.contain('folder lib/stray/ is in no layer')
  })

  it('reports an import cycle, inside one folder too', () => {
    tree({
      'lib/low/a.ts': "import {b} from './b.js'\nexport const a = () => b\n",
      'lib/low/b.ts': "import {c} from './c.js'\nexport const b = () => c\n",
      'lib/low/c.ts': "import type {a} from './a.js'\nexport const c: typeof a | undefined = undefined\n",
    })
    const problems = checkLayers(root, LAYERS)
    expect(problems.map((p) => p.message)).to.deep.equal(['import cycle among lib/low/a.ts, lib/low/b.ts, lib/low/c.ts'])
  })

  it('reports two folders that import each other through a subfolder placed above the other', () => {
    const layers = [['lib'], ['lib/low'], ['lib/high'], ['lib/low/top']]
    tree({
      'lib/low/a.ts': 'export const a = 1\n',
      'lib/high/x.ts': "import {a} from '../low/a.js'\nexport const x = a\n",
      'lib/low/top/run.ts': "import {x} from '../../high/x.js'\nexport const run = x\n",
    })
    const problems = checkLayers(root, layers)
    expect(problems).to.have.length(1)
    expect(problems[0].message).to.contain('folders lib/high/, lib/low/ (with their subfolders) import each other')
    expect(problems[0].message).to.contain('lib/low/top/run.ts imports lib/high/x.ts')
  })

  it('passes the source tree of mb itself', () => {
    expect(checkLayers(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src'))).to.deep.equal([])
  })
})
