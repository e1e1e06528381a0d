/**
 * Metalink documents built straight from the database, without a running server: what
 * `mb metalink PATH` prints. The same document model, selection and freshness rule as
 * `mb serve` (src/lib/metalink/routes.ts), so the output equals what the server would send
 * to that client (with `baseUrl` standing in for the request's Host).
 */
import {stat} from 'node:fs/promises'
import {join} from 'node:path'
import type {Config} from '../config/index.js'
import type {Database} from '../db/index.js'
import {MbError} from '../errors.js'
import {clientFromFlag, configuredGeo} from '../lookup/client.js'
import {hashesFresh} from '../origin/freshness.js'
import {readStoredHashes} from '../origin/hash.js'
import {readLinks, resolveLinks} from '../origin/links.js'
import {compileMirrors, compileSelectOptions, select, selectionContext} from '../select/index.js'
import {buildDocument, type MetalinkDocument} from './document.js'
import {renderMeta4} from './meta4.js'
import {renderMetalink3} from './metalink3.js'
import {trimLeadingSlashes} from '../text.js'

export interface OfflineOptions {
  /** Origin-relative path (a leading '/' is ignored). */
  path: string
  /** The client address to select for (default 127.0.0.1). */
  clientIp?: string
  /** The server's public base URL (default `http://` + serve.listen + `/`). */
  baseUrl?: string
  format?: 'meta4' | 'metalink'
  /** Mirror URLs (default: `select.metalink_max_mirrors`). */
  maxUrls?: number
  now?: Date
}

/**
 * Builds the metalink of `options.path` for `options.clientIp`.
 * @returns the document model and its rendered text
 * @throws UsageError for a bad client address; MbError (FILE_NOT_FOUND) when the path is not indexed
 */
export async function offlineMetalink(database: Database, config: Config, options: OfflineOptions): Promise<{doc: MetalinkDocument; text: string}> {
  const asked = trimLeadingSlashes(options.path)
  const facts = clientFromFlag(options.clientIp ?? '127.0.0.1', (options.baseUrl ?? '').startsWith('https:'))
  const find = (p: string) => database.db.selectFrom('file').select(['path', 'size', 'mtime', 'mirrors']).where('path', '=', p).executeTakeFirst()
  let row = await find(asked)
  // Through symlinks, the document describes the canonical file (./links.ts in origin/).
  const canonical = row === undefined ? resolveLinks(await readLinks(database.db), asked) : undefined
  if (canonical !== undefined) row = await find(canonical)
  const path = row?.path ?? asked
  if (!row) throw new MbError(`${path} is not in the origin index; check the path (relative to the root) or run \`mb index\`.`, {code: 'FILE_NOT_FOUND'})
  const mirrors = compileMirrors(await database.db.selectFrom('mirror').selectAll().execute())
  const file = {path: row.path, size: Number(row.size), mtime: Number(row.mtime), mirrors: row.mirrors}
  const context = selectionContext(facts, await configuredGeo(config), file, mirrors, compileSelectOptions(config.select))
  const selection = select(context.client, context.file, context.mirrors, context.options, false)
  const stored = await readStoredHashes(database, path)
  let fresh = hashesFresh(stored)
  if (fresh && config.root) fresh = hashesFresh(stored, await stat(join(config.root, path)).catch(() => ({size: -1, mtimeMs: -1})))
  const doc = buildDocument({
    path,
    size: file.size,
    mtime: file.mtime,
    stored,
    hashesFresh: fresh,
    selection,
    baseUrl: options.baseUrl ?? `http://${config.serve.listen}/`,
    maxUrls: options.maxUrls ?? context.options.metalinkMaxMirrors,
    now: options.now,
  })
  return {doc, text: options.format === 'metalink' ? renderMetalink3(doc) : renderMeta4(doc)}
}
