/**
 * Human output: a cli-table3 table on a TTY, tab-separated plain lines otherwise (cron, pipes).
 * Machine output is `--json`, handled by the command base class.
 *
 * On a TTY the table fits the terminal's width (`process.stdout.columns`, or `COLUMNS`):
 * columns of low value (a column's `priority`, lowest first, then the rightmost) are left out
 * until it fits, and a note under the table names them; what still does not fit is wrapped
 * inside its cells. `--wide` (every command's flag, {@link setWideTables}) prints the full
 * table, as `--json` gives every field.
 */
import Table from 'cli-table3'
import {isoSeconds} from './time.js'

/** A column: header text and how to get the cell from a row. */
export interface Column<T> {
  header: string
  get: (row: T) => unknown
  /**
   * How much the column is worth keeping when the table is too wide for the terminal:
   * columns are left out lowest first (default 1; the first column is always kept).
   */
  priority?: number
}

let wideTables = false

/** `--wide`: tables are printed in full, whatever the terminal's width. */
export function setWideTables(wide: boolean): void {
  wideTables = wide
}

/** The terminal's width in columns: stdout's, else `COLUMNS`, else 80. */
function terminalWidth(): number {
  const fromEnv = Number(process.env.COLUMNS)
  return process.stdout.columns || (Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : 80)
}

/** Columns shorter than this are never wrapped below it (characters). */
const MIN_CELL = 6

/**
 * Fits a table of `cells` (header first) to `width` characters: the columns to keep (by
 * index, in order) and, when even those are too wide, the width of each (cli-table3
 * `colWidths`, padding and the left border included); undefined widths: natural.
 */
function fitColumns(cells: string[][], priorities: number[], width: number): {keep: number[]; widths?: number[]} {
  const natural = priorities.map((_, i) => Math.max(...cells.map((row) => Math.max(...row[i].split('\n').map((l) => [...l].length)))) + 2)
  const total = (keep: number[]) => keep.reduce((sum, i) => sum + natural[i] + 1, 1)
  let keep = priorities.map((_, i) => i)
  // Drop order: lowest priority first, the rightmost first among equals; never column 0.
  const order = keep.slice(1).sort((a, b) => priorities[a] - priorities[b] || b - a)
  for (const i of order) {
    if (total(keep) <= width) break
    if (keep.length <= 2) break
    keep = keep.filter((k) => k !== i)
  }
  if (total(keep) <= width) return {keep}
  // Still too wide: share the room out, the widest columns giving up space first.
  const room = width - 1 - keep.length
  const widths = keep.map((i) => natural[i])
  let over = widths.reduce((a, b) => a + b, 0) - room
  while (over > 0) {
    const widest = widths.indexOf(Math.max(...widths))
    if (widths[widest] <= MIN_CELL + 2) break
    widths[widest] -= 1
    over -= 1
  }
  return {keep, widths}
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it replaces
const CONTROLS = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/g

/**
 * `text` with each control character but LF (C0, DEL, C1) written as `\xHH`: a value such as
 * an origin file's name (`a\x1b]0;…\x07`) is printed to an operator's terminal, where an
 * escape sequence would retitle it, clear it or move the cursor, and a tab or CR would break
 * the tab-separated lines.
 */
function visible(text: string): string {
  return CONTROL.test(text) ? text.replace(CONTROLS, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`) : text
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-'
  if (value instanceof Date) return isoSeconds(value)
  if (Array.isArray(value)) return value.length === 0 ? '-' : visible(value.join(','))
  return visible(String(value))
}

/**
 * Renders rows as text. `tty` decides the style: a boxed table (true) fitted to `width`
 * characters (default: the terminal's, or unbounded under `--wide`; see the module doc), or
 * a header line plus tab-separated lines (false). Returns the text without a trailing newline.
 */
export function renderTable<T>(rows: T[], columns: Column<T>[], tty = Boolean(process.stdout.isTTY), width = wideTables ? Number.POSITIVE_INFINITY : terminalWidth()): string {
  if (tty) {
    const cells = [columns.map((c) => c.header), ...rows.map((row) => columns.map((c) => cell(c.get(row))))]
    const {keep, widths} = fitColumns(
      cells,
      columns.map((c) => c.priority ?? 1),
      width,
    )
    const table = new Table({
      head: keep.map((i) => cells[0][i]),
      style: {head: [], border: []},
      ...(widths ? {colWidths: widths, wordWrap: true, wrapOnWordBoundary: false} : {}),
    })
    for (const row of cells.slice(1)) table.push(keep.map((i) => row[i]))
    const left = columns.filter((_, i) => !keep.includes(i)).map((c) => c.header)
    return left.length === 0 ? table.toString() : `${table.toString()}\n${wrapWords(`(not shown to fit the terminal: ${left.join(', ')}; --wide shows every column)`, width)}`
  }
  const lines = [columns.map((c) => c.header).join('\t')]
  for (const row of rows) lines.push(columns.map((c) => cell(c.get(row))).join('\t'))
  return lines.join('\n')
}

/** `text` broken at spaces into lines of at most `width` characters (a longer word stays whole). */
function wrapWords(text: string, width: number): string {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else {
      line = line ? `${line} ${word}` : word
    }
  }
  if (line) lines.push(line)
  return lines.join('\n')
}

/** Renders `key: value` lines, aligned, for a single record. */
export function renderRecord(entries: Array<[string, unknown]>): string {
  const width = Math.max(0, ...entries.map(([k]) => k.length))
  return entries.map(([k, v]) => `${(k + ':').padEnd(width + 2)}${cell(v)}`).join('\n')
}
