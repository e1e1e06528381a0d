import {expect} from 'chai'
import {existsSync, readdirSync, readFileSync, statSync} from 'node:fs'
import {dirname, join, relative, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

/**
 * README.md and docs/: every relative link reaches a file (and, with `#anchor`, a heading of
 * that file), and the generated command reference has a section for every command in
 * src/commands (`npm run readme` regenerates it).
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** The files below `dir` whose names end with `suffix`. */
function filesBelow(dir: string, suffix: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return filesBelow(path, suffix)
    return name.endsWith(suffix) ? [path] : []
  })
}

const PAGES = [join(ROOT, 'README.md'), ...filesBelow(join(ROOT, 'docs'), '.md')]

/** The text with fenced code blocks blanked (their line breaks kept, so line numbers hold). */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, (block) => block.replace(/[^\n]/g, ''))
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The anchors of a page's headings (ATX `# x` and setext `x` over `===`/`---`), numbered as GitHub numbers repeats. */
function anchors(path: string): Set<string> {
  const lines = prose(readFileSync(path, 'utf8')).split('\n')
  const seen = new Map<string, number>()
  const result = new Set<string>()
  for (let i = 0; i < lines.length; i++) {
    const atx = /^#{1,6}\s+(.*?)\s*#*$/.exec(lines[i])
    const setext = i + 1 < lines.length && lines[i].trim() !== '' && /^(=+|-+)$/.test(lines[i + 1]) ? lines[i] : undefined
    const text = atx?.[1] ?? setext
    if (text === undefined) continue
    const base = slug(text)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    result.add(n === 0 ? base : `${base}-${n}`)
  }
  return result
}

/** The command a file under src/commands defines: `mirror/add.ts` → `mirror add`, `scan/index.ts` → `scan`. */
function commandId(file: string): string {
  return file
    .replace(/\.ts$/, '')
    .replace(/(^|\/)index$/, '')
    .replaceAll('/', ' ')
}

/** Relative link targets `[text](target)` outside code, with the line they are on. */
function links(path: string): Array<{target: string; line: number}> {
  const text = prose(readFileSync(path, 'utf8'))
  const found: Array<{target: string; line: number}> = []
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // http:, https:, mailto:
    found.push({target, line: text.slice(0, m.index).split('\n').length})
  }
  return found
}

describe('README and docs/', () => {
  it('every relative link reaches a file and, with #anchor, one of its headings', () => {
    const broken: string[] = []
    for (const page of PAGES) {
      for (const {target, line} of links(page)) {
        const [file, anchor] = target.split('#', 2)
        const to = file === '' ? page : resolve(dirname(page), decodeURIComponent(file))
        const where = `${relative(ROOT, page)}:${line} → ${target}`
        if (!existsSync(to)) broken.push(`${where}: no such file`)
        else if (anchor !== undefined && to.endsWith('.md') && !anchors(to).has(anchor)) broken.push(`${where}: no heading with that anchor`)
      }
    }
    expect(broken).to.deep.equal([])
  })

  it('the command reference has a section for every command (run `npm run readme` after changing one)', () => {
    const commands = join(ROOT, 'src', 'commands')
    const ids = filesBelow(commands, '.ts').map((file) => commandId(relative(commands, file)))
    const missing = ids.filter((id) => {
      const page = join(ROOT, 'docs', 'commands', `${id.split(' ')[0]}.md`)
      return !existsSync(page) || !new RegExp(`^## \`mb ${id}( |\`)`, 'm').test(readFileSync(page, 'utf8'))
    })
    expect(ids).to.include('serve')
    expect(missing).to.deep.equal([])
  })

  it('command descriptions hold one line per paragraph (oclif wraps each line to the terminal, so a break inside one leaves ragged lines in --help)', () => {
    const commands = join(ROOT, 'src', 'commands')
    const wrapped: string[] = []
    for (const file of filesBelow(commands, '.ts')) {
      const description = /static override description = `([\s\S]*?)`\n/.exec(readFileSync(file, 'utf8'))?.[1] ?? ''
      const lines = description.split('\n')
      for (let i = 1; i < lines.length; i++) {
        // A list item, an indented line or a table row may start a line of its own.
        const continues = lines[i - 1].trim() !== '' && lines[i].trim() !== '' && !/^[\s|*-]/.test(lines[i]) && !/^[\s|]/.test(lines[i - 1])
        if (continues) wrapped.push(`${relative(ROOT, file)}: ${lines[i].slice(0, 40)}`)
      }
    }
    expect(wrapped).to.deep.equal([])
  })

  it('the README links every docs page and holds no generated command reference', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    expect(readme).not.to.contain('<!-- commands -->')
    const linked = new Set(links(join(ROOT, 'README.md')).map(({target}) => target.split('#')[0]))
    const pages = filesBelow(join(ROOT, 'docs'), '.md')
      .map((path) => relative(ROOT, path))
      .filter((path) => !path.startsWith('docs/commands/'))
    expect(pages.filter((page) => !linked.has(page))).to.deep.equal([])
    expect(linked).to.include('docs/commands/README.md')
  })
})
