/**
 * SQL fragments shared by the modules that query the store (PostgreSQL syntax, also PGlite).
 */
import {sql, type RawBuilder} from 'kysely'

/**
 * `text` with the LIKE wildcards `%` and `_` and the escape character `\` escaped, so that it
 * matches literally inside a LIKE/ILIKE pattern (`\` is PostgreSQL's default LIKE escape).
 */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`)
}

/**
 * SQL condition "`column` lies in the subtree `prefix`": the path starts with `prefix/`.
 * `prefix` is origin-relative without leading or trailing slash; '' means everything (`true`).
 */
export function inSubtree(prefix: string, column = 'path'): RawBuilder<boolean> {
  return prefix === '' ? sql<boolean>`true` : sql<boolean>`starts_with(${sql.ref(column)}, ${prefix + '/'})`
}

/**
 * SQL condition "`column` lies directly in the folder `folder`" (not in a subfolder of it).
 * `folder` is origin-relative without leading or trailing slash; '' means the top of the tree.
 */
export function inFolder(folder: string, column = 'path'): RawBuilder<boolean> {
  const ref = sql.ref(column)
  return folder === '' ? sql<boolean>`strpos(${ref}, '/') = 0` : sql<boolean>`(starts_with(${ref}, ${folder + '/'}) AND strpos(substr(${ref}, ${folder.length + 2}), '/') = 0)`
}

/**
 * SQL text expression: the folder of the path in `column`, as `folderOf` (../text.ts) computes
 * it: everything before its last `/`, or `top` (a literal) for a path with no `/`.
 */
export function folderSql(column: string, top = ''): RawBuilder<string> {
  const ref = sql.ref(column)
  return sql<string>`CASE WHEN strpos(${ref}, '/') = 0 THEN ${sql.lit(top)} ELSE regexp_replace(${ref}, '/[^/]*$', '') END`
}

/**
 * The items of a PostgreSQL array column, which arrives as a JS array, or as its text form
 * `{a,b,"c"}` when no array parser is registered for its type (e.g. `cidr[]`). Anything else
 * reads as no items. Items are strings; double quotes around an item are dropped.
 */
export function textArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String)
  if (typeof value === 'string') {
    const inner = value.replace(/^\{|\}$/g, '').trim()
    return inner ? inner.split(',').map((s) => s.trim().replace(/^"|"$/g, '')) : []
  }
  return []
}
