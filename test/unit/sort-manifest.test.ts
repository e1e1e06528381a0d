import {spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'

const SCRIPT = fileURLToPath(new URL('../../scripts/sort-manifest.mjs', import.meta.url))
const PACKAGE = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8'))

describe('oclif manifest: one commit, one tarball (scripts/sort-manifest.mjs)', () => {
  it('the build sorts the manifest after oclif writes it', () => {
    expect(PACKAGE.scripts.build).to.match(/oclif manifest[^&]*&& node scripts\/sort-manifest\.mjs$/)
  })

  it('gives the same bytes whatever order oclif found the commands in', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-manifest-'))
    try {
      const command = (id: string) => ({id, flags: {zeta: {}, alpha: {}}})
      const orders = [
        ['serve', 'mirror:add', 'serve:reload', 'db:migrate'],
        ['db:migrate', 'serve:reload', 'serve', 'mirror:add'],
      ]
      const outputs = orders.map((ids, i) => {
        const file = join(dir, `m${i}.json`)
        writeFileSync(file, JSON.stringify({commands: Object.fromEntries(ids.map((id) => [id, command(id)])), version: '1'}, null, 2))
        const run = spawnSync(process.execPath, [SCRIPT, file], {encoding: 'utf8'})
        expect(run.status, run.stderr).to.equal(0)
        return readFileSync(file, 'utf8')
      })
      expect(outputs[0]).to.equal(outputs[1])
      const manifest = JSON.parse(outputs[0])
      expect(Object.keys(manifest.commands)).to.deep.equal(['db:migrate', 'mirror:add', 'serve', 'serve:reload'])
      // Only the command order changes: a command's own flags keep their (help) order.
      expect(Object.keys(manifest.commands.serve.flags)).to.deep.equal(['zeta', 'alpha'])
      expect(manifest.version).to.equal('1')
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
