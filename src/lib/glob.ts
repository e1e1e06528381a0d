/**
 * Syntax checks for the glob patterns mb stores (mirror `--include`/`--exclude`/`--push-include`,
 * rule `--path`, `scan.include`/`scan.exclude`), matched with picomatch on origin paths.
 *
 * picomatch compiles almost anything: an unclosed `[` becomes a literal bracket and an
 * unclosed `{` a pattern that matches nothing, so a typo would be stored and silently match
 * the wrong files (or none). A pattern here must be well formed: brackets, braces and
 * parentheses closed, a backslash escaping something. A literal `[`, `{` or `(` is written
 * with a backslash (`\[`).
 */
import picomatch from 'picomatch'

/** Where a bracket expression that starts at `open` (a `[`) ends (its `]`), or -1 when it does not. */
function closingBracket(pattern: string, open: number): number {
  let i = open + 1
  if (pattern[i] === '!' || pattern[i] === '^') i++
  if (pattern[i] === ']') i++ // a leading ']' is a member, not the end
  for (; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') i++
    else if (c === '[' && pattern[i + 1] === ':') {
      const end = pattern.indexOf(':]', i + 2)
      if (end < 0) return -1
      i = end + 1
    } else if (c === ']') return i
  }
  return -1
}

/**
 * Why `pattern` is not a well-formed glob (a short phrase for an error message), or
 * undefined when it is one: unclosed `[`, `{` or `(`, a `}` or `)` that closes nothing, a
 * trailing lone backslash, or a pattern picomatch cannot compile or that can match nothing.
 */
export function globProblem(pattern: string): string | undefined {
  const open: string[] = []
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') {
      if (i === pattern.length - 1) return 'it ends with a lone backslash'
      i++
    } else if (c === '[') {
      const end = closingBracket(pattern, i)
      if (end < 0) return 'a "[" is not closed by "]" (write \\[ for a literal bracket)'
      i = end
    } else if (c === '{' || c === '(') open.push(c)
    else if (c === '}' || c === ')') {
      const expected = c === '}' ? '{' : '('
      if (open.pop() !== expected) return `a "${c}" closes nothing (write \\${c} for a literal one)`
    }
  }
  if (open.length > 0) return `a "${open.at(-1)}" is not closed (write \\${open.at(-1)} for a literal one)`
  let source: string
  try {
    source = picomatch.makeRe(pattern, {dot: true}).source
  } catch (error) {
    return `picomatch cannot compile it (${(error as Error).message})`
  }
  if (source === '$^') return 'it can match no path'
  return undefined
}

/**
 * Why `pattern` cannot match an origin path (origin-relative, '/'-separated, no leading slash,
 * no `.` or `..` segment), or undefined: {@link globProblem}, or an empty pattern, a leading
 * `/`, or a `.`/`..` segment.
 */
export function originGlobProblem(pattern: string): string | undefined {
  if (pattern.trim() === '') return 'it is empty'
  // '/' alone means the whole tree: its glob is '**' (an empty one is refused above).
  if (pattern.startsWith('/')) return `origin paths have no leading slash: write ${JSON.stringify(pattern.replace(/^\/+/, '') || '**')}`
  if (pattern.split('/').some((segment) => segment === '.' || segment === '..')) return 'origin paths have no "." or ".." segment'
  return globProblem(pattern)
}

/**
 * Builds the include/exclude filter for origin paths: a path counts when it matches every
 * non-empty include list (global, then per mirror) and no exclude glob. Globs are picomatch
 * with `dot: true`.
 */
export function pathFilter(include: string[][], exclude: string[]): (path: string) => boolean {
  const includes = include.filter((list) => list.length > 0).map((list) => picomatch(list, {dot: true}))
  const excludes = exclude.length > 0 ? picomatch(exclude, {dot: true}) : undefined
  return (path) => includes.every((m) => m(path)) && !excludes?.(path)
}
