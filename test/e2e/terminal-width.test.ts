// @store-independent: table layout in a terminal
/**
 * Tables fit the terminal: `mb mirror list` in a real terminal (a tmux pane of 80 and of 200
 * columns, the command's output recorded by `script`, so nothing is wrapped by the terminal
 * itself) keeps every line within the width, leaving out low-value columns; `--wide` prints
 * them all; without a terminal the output stays tab-separated lines.
 */
import {execFileSync} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {BIN, mb, NO_CONFIG, NO_CONFIG_HOME, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

/** Single-quotes `text` for sh. */
const sh = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

describe(`e2e: tables fit the terminal (${backend})`, function () {
  this.timeout(300_000)
  let t: TestDatabase
  let dir: string
  const socket = `mb-test-${process.pid}`
  const sockets: string[] = []
  let runs = 0

  before(async function () {
    requireBinary(this, 'tmux', 'tmux')
    requireBinary(this, 'script', 'bsdutils')
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-terminal-'))
    for (const [name, cc] of [
      ['ftp.example-university.de', 'DE'],
      ['mirror.a-rather-long-hostname.example.org', 'US'],
      ['nz.example.net', 'NZ'],
    ]) {
      const r = await mb(['mirror', 'add', name, '--http-url', `http://${name}/pub/linux/distributions/`, '--country', cc, '--no-probe'], {env: t.env})
      expect(r.code, r.stderr).to.equal(0)
    }
  })

  after(async () => {
    for (const server of sockets) {
      try {
        execFileSync('tmux', ['-L', server, 'kill-server'], {stdio: 'ignore'})
      } catch {
        /* it has exited with its session */
      }
    }
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  /** Runs `mb ARGS` in a tmux pane `columns` wide; returns the lines it wrote. */
  function inTerminal(columns: number, args: string[]): string[] {
    const out = join(dir, `out-${runs + 1}.txt`)
    const env = {...t.env, XDG_CONFIG_HOME: NO_CONFIG_HOME}
    const vars = Object.entries(env)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${sh(v!)}`)
      .join(' ')
    const command = `env -u COLUMNS MB_CONFIG=${NO_CONFIG} ${vars} ${sh(process.execPath)} ${sh(BIN)} ${args.map(sh).join(' ')}`
    // A tmux server of its own per run: a server whose last session ended exits, and a
    // new session must not race it.
    const server = `${socket}-${++runs}`
    sockets.push(server)
    execFileSync('tmux', ['-L', server, '-f', '/dev/null', 'new-session', '-d', '-x', String(columns), '-y', '50', `script -q -e -c ${sh(command)} ${sh(out)}; tmux -L ${server} wait-for -S done`])
    execFileSync('tmux', ['-L', server, 'wait-for', 'done'], {timeout: 120_000})
    expect(existsSync(out)).to.equal(true)
    return readFileSync(out, 'utf8')
      .replace(/\r/g, '')
      .split('\n')
      .filter((l) => l !== '' && !/^Script (started|done)/.test(l))
  }

  it('fits 80 and 200 columns, and --wide prints every column', () => {
    const narrow = inTerminal(80, ['mirror', 'list'])
    expect(Math.max(...narrow.map((l) => [...l].length))).to.be.at.most(80)
    expect(narrow.join('\n')).to.contain('mirror.a-rather-long-hostname.example.org')
    expect(narrow[1], narrow.join('\n')).to.match(/│ name +│ country │ enabled │ up +│/)
    expect(narrow.join(' ')).to.match(/\(not shown to fit the terminal: .*base_url.*--wide shows every column\)/)

    const wide = inTerminal(200, ['mirror', 'list'])
    expect(Math.max(...wide.map((l) => [...l].length))).to.be.at.most(200)
    // At 200 columns only the long base URLs are left out.
    expect(wide[1], wide.join('\n')).to.match(/^│ name +│ country │ continent │ score │ enabled │ up +│ status_reason │ last_scan │ scan_result │ push_result │ probe +│ last_probe │ probe_reason │$/)
    expect(wide.at(-1)).to.equal('(not shown to fit the terminal: base_url; --wide shows every column)')

    const full = inTerminal(80, ['mirror', 'list', '--wide'])
    expect(full[1]).to.match(/│ name .*│ base_url .*│ probe_reason │/)
    expect(Math.max(...full.map((l) => [...l].length))).to.be.greaterThan(200)
    expect(full.join('\n')).to.not.contain('not shown')
  })

  it('prints tab-separated lines without a terminal, whatever COLUMNS says', async () => {
    const r = await mb(['mirror', 'list'], {env: {...t.env, COLUMNS: '40'}})
    expect(r.stdout.split('\n')[0]).to.equal('name\tcountry\tcontinent\tscore\tenabled\tup\tstatus_reason\tlast_scan\tscan_result\tpush_result\tbase_url\tprobe\tlast_probe\tprobe_reason')
  })
})
