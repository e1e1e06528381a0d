/**
 * A plain HTML directory listing of the origin tree, like nginx's or Apache's autoindex:
 * name, size in bytes and modification time (UTC), and for each indexed file a "details"
 * button to its mirror list (`NAME.mirrorlist`, as MirrorBrain's autoindex has), which links
 * every format of the file. Names are HTML-escaped and links are percent-encoded
 * (RFC 3986), so any file name is shown and linked safely.
 *
 * The details are a one-button GET form (`rel="nofollow"`), not a link: mirroring tools
 * (`wget -m`, lftp's `mirror`) follow every `<a href>` of a listing, and neither honours
 * `rel="nofollow"` on a link, so they saved each mirror list as a junk file beside the real
 * one; neither submits forms. A browser shows the button as a link and opens the same URL.
 */
import {readdir, realpath, stat} from 'node:fs/promises'
import {join, sep} from 'node:path'
import {relativeReference} from '../../select/url.js'

const HTML_ESCAPES: Record<string, string> = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}

/** Escapes text for HTML element content and double-quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c])
}

/** One listed entry. Size in bytes (null for directories), mtime as a Date. */
export interface IndexEntry {
  name: string
  directory: boolean
  size: number | null
  mtime: Date
}

/**
 * Lists directory `dir` (absolute, already checked to lie inside `rootReal`). Entries whose
 * real path leaves the root (symlinks pointing outside) or that cannot be stat'ed are left
 * out. Directories first, then files, each by name (code-point order).
 */
export async function listDirectory(dir: string, rootReal: string): Promise<IndexEntry[]> {
  const names = await readdir(dir)
  const entries: IndexEntry[] = []
  await Promise.all(
    names.map(async (name) => {
      const full = join(dir, name)
      try {
        const real = await realpath(full)
        if (real !== rootReal && !real.startsWith(rootReal + sep)) return
        const st = await stat(real)
        if (!st.isDirectory() && !st.isFile()) return
        entries.push({name, directory: st.isDirectory(), size: st.isDirectory() ? null : st.size, mtime: st.mtime})
      } catch {
        /* vanished or unreadable: leave it out */
      }
    }),
  )
  entries.sort((a, b) => (a.directory !== b.directory ? (a.directory ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return entries
}

function date(d: Date): string {
  return d.toISOString().slice(0, 16).replace('T', ' ')
}

/** The "details" button of a file: a GET form to `target` (a relative reference) that mirroring tools do not follow (see the module doc). */
function detailsButton(target: string): string {
  return `<form class="details" method="get" action="${escapeHtml(target)}" rel="nofollow"><button type="submit">details</button></form>`
}

/**
 * Renders the listing of origin directory `path` ('' = root, no slashes at either end).
 * Links are relative to the slashed directory URL. `indexed(name)` tells which files of the
 * directory are in the origin index: those get a "details" link to their mirror list.
 */
export function renderIndex(path: string, entries: IndexEntry[], indexed: (name: string) => boolean = () => false): string {
  const title = escapeHtml(`Index of /${path}${path ? '/' : ''}`)
  const rows: string[] = []
  if (path) rows.push('<tr><td><a href="../">../</a></td><td></td><td></td><td></td></tr>')
  for (const e of entries) {
    const href = relativeReference(e.name) + (e.directory ? '/' : '')
    const label = escapeHtml(e.name) + (e.directory ? '/' : '')
    const details = !e.directory && indexed(e.name) ? detailsButton(relativeReference(`${e.name}.mirrorlist`)) : ''
    rows.push(`<tr><td><a href="${escapeHtml(href)}">${label}</a></td><td align="right">${e.size === null ? '-' : e.size}</td><td>${date(e.mtime)}</td><td>${details}</td></tr>`)
  }
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${title}</title>
<style>form.details{display:inline;margin:0}form.details button{border:0;padding:0;background:none;color:#00e;text-decoration:underline;cursor:pointer;font:inherit}</style></head>
<body><h1>${title}</h1>
<table><thead><tr><th align="left">Name</th><th align="right">Size (bytes)</th><th align="left">Last modified (UTC)</th><th align="left">Mirrors</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table>
</body></html>
`
}
