/**
 * Human output: a cli-table3 table on a TTY, tab-separated plain lines otherwise (cron, pipes).
 * Machine output is `--json`, handled by the command base class.
 */
import Table from 'cli-table3'
import {isoSeconds} from './time.js'

/** A column: header text and how to get the cell from a row. */
export interface Column<T> {
  header: string
  get: (row: T) => unknown
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-'
  if (value instanceof Date) return isoSeconds(value)
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.join(',')
  return String(value)
}

/**
 * Renders rows as text. `tty` decides the style: a boxed table (true) or a header line plus
 * tab-separated lines (false). Returns the text without a trailing newline.
 */
export function renderTable<T>(rows: T[], columns: Column<T>[], tty = Boolean(process.stdout.isTTY)): string {
  if (tty) {
    const table = new Table({head: columns.map((c) => c.header), style: {head: [], border: []}})
    for (const row of rows) table.push(columns.map((c) => cell(c.get(row))))
    return table.toString()
  }
  const lines = [columns.map((c) => c.header).join('\t')]
  for (const row of rows) lines.push(columns.map((c) => cell(c.get(row))).join('\t'))
  return lines.join('\n')
}

/** Renders `key: value` lines, aligned, for a single record. */
export function renderRecord(entries: Array<[string, unknown]>): string {
  const width = Math.max(0, ...entries.map(([k]) => k.length))
  return entries.map(([k, v]) => `${(k + ':').padEnd(width + 2)}${cell(v)}`).join('\n')
}
