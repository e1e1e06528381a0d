/**
 * Fails when a function in src/ has a body over MAX_LINES lines and no comment saying why it must
 * be one function, or when a source file is over MAX_FILE_LINES lines. Run by `npm run lint`.
 *
 * A body's length is counted from the line of its opening brace to the line of its closing brace,
 * blank and comment lines included (Biome's noExcessiveLinesPerFunction skips comments and so
 * counts fewer). A function is exempt when a comment before it, or before the statement or class
 * member that holds it, contains EXEMPT_MARKER followed by the reason.
 *
 * Usage: node --import tsx scripts/long-functions.ts [--all] [DIR...]   (default DIR: src;
 * --all lists the exempt functions too)
 */
import {readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import ts from 'typescript'

const MAX_LINES = 80
/** Lines a source file may have: a longer one holds more than one concept; split it by concept. */
const MAX_FILE_LINES = 500
const EXEMPT_MARKER = 'Kept as one function:'

interface LongFunction {
  file: string
  line: number
  name: string
  lines: number
  exempt: boolean
}

/** The .ts files under the given directories, sorted. */
function sources(dirs: string[]): string[] {
  return dirs
    .flatMap((dir) =>
      readdirSync(dir, {recursive: true, encoding: 'utf8'})
        .filter((f) => f.endsWith('.ts'))
        .map((f) => join(dir, f)),
    )
    .sort()
}

/** A readable name: the declared name, the variable or property it is assigned to, or `<anonymous>`. */
function functionName(node: ts.FunctionLikeDeclaration): string {
  if (node.name) return node.name.getText()
  const parent = node.parent
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) return parent.name.getText()
  return '<anonymous>'
}

/** Whether a comment before the function, or before the statement or class member holding it, carries the marker. */
function isExempt(node: ts.Node, text: string): boolean {
  for (let n: ts.Node | undefined = node; n && !ts.isSourceFile(n); n = n.parent) {
    const comments = ts.getLeadingCommentRanges(text, n.getFullStart()) ?? []
    if (comments.some((c) => text.slice(c.pos, c.end).includes(EXEMPT_MARKER))) return true
    if (ts.isStatement(n) || ts.isClassElement(n)) break
  }
  return false
}

/** Every function-like node in one file whose body is over MAX_LINES lines. */
function longFunctions(file: string): LongFunction[] {
  const text = readFileSync(file, 'utf8')
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found: LongFunction[] = []
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body && ts.isBlock(node.body as ts.Node)) {
      const fn = node as ts.FunctionLikeDeclaration
      const body = fn.body!
      const first = source.getLineAndCharacterOfPosition(body.getStart()).line
      const last = source.getLineAndCharacterOfPosition(body.getEnd()).line
      const lines = last - first + 1
      if (lines > MAX_LINES) found.push({file, line: source.getLineAndCharacterOfPosition(fn.getStart()).line + 1, name: functionName(fn), lines, exempt: isExempt(fn, text)})
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

const args = process.argv.slice(2)
const listAll = args.includes('--all')
const dirs = args.filter((a) => a !== '--all')
const files = sources(dirs.length > 0 ? dirs : ['src'])
const all = files.flatMap(longFunctions)
const longFiles = files.map((file) => ({file, lines: readFileSync(file, 'utf8').split('\n').length - 1})).filter((f) => f.lines > MAX_FILE_LINES)
for (const f of longFiles) console.log(`${f.file}: ${f.lines} lines`)
if (longFiles.length > 0) console.error(`${longFiles.length} file(s) over ${MAX_FILE_LINES} lines. Split each by concept.`)
const failing = all.filter((f) => !f.exempt)
for (const f of listAll ? all : failing) {
  console.log(`${f.file}:${f.line} ${f.name}: ${f.lines} lines${f.exempt ? ' (exempt)' : ''}`)
}
if (failing.length > 0 || longFiles.length > 0) {
  if (failing.length > 0)
    console.error(`${failing.length} function(s) over ${MAX_LINES} lines. Split them into named steps, or say why one must stay whole in a comment containing "${EXEMPT_MARKER}".`)
  process.exit(1)
}
