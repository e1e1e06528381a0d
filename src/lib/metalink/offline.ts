/**
 * Metalink documents built straight from the database, without a running server: what
 * `mb metalink PATH` prints (Metalink 4 or 3, and the BitTorrent, magnet and zsync files of
 * formats.ts). The same document model, selection and freshness rule as `mb serve`
 * (src/lib/metalink/routes.ts), so the output equals what the server would send to that
 * client (with `baseUrl` standing in for the request's Host).
 */
import type {SyncConfig} from '../sync/config.js'
import {stat} from 'node:fs/promises'
import {join} from 'node:path'
import type {Database} from '../db/index.js'
import {MbError} from '../errors.js'
import {clientFromFlag, configuredGeo, type GeoSettings} from '../lookup/client.js'
import type {SelectConfig} from '../select/config.js'
import type {ServeConfig} from '../serve/config.js'
import {hashesFresh} from '../origin/freshness.js'
import {readStoredHashes} from '../origin/hash.js'
import {readLinks, resolveLinks} from '../origin/links.js'
import {compileMirrors, compileSelectOptions, select, selectionContext} from '../select/index.js'
import {syncSelectOptions} from '../sync/trace.js'
import {buildDocument, type MetalinkDocument} from './document.js'
import {FormatStore, isUnavailable, magnetBody, torrentBody, zsyncUrls} from './formats.js'
import type {TorrentInfo} from './torrent.js'
import {type TorrentConfig, type ZsyncConfig, zsyncMinSize} from './formats-config.js'
import {renderZsync, type ZsyncControl} from './zsync-control.js'
import {sql} from 'kysely'
import {renderMeta4} from './meta4.js'
import {renderMetalink3} from './metalink3.js'
import {trimLeadingSlashes, withTrailingSlash} from '../text.js'
import {BaseUrls} from '../serve/delivery/public-url.js'

/** The formats `mb metalink --format` writes. */
export type OfflineFormat = 'meta4' | 'metalink' | 'torrent' | 'magnet' | 'zsync'

export interface OfflineOptions {
  /** Origin-relative path (a leading '/' is ignored). */
  path: string
  /** The client address to select for (default 127.0.0.1). */
  clientIp?: string
  /** The server's public base URL (default `serve.public_url`, else `http://` + serve.listen + `/`). */
  baseUrl?: string
  format?: OfflineFormat
  /** Mirror URLs (default: `select.metalink_max_mirrors`). */
  maxUrls?: number
  now?: Date
}

/** The settings `mb metalink` reads: GeoIP, the origin `root`, and the sections that shape the document. */
export interface OfflineSettings extends GeoSettings {
  root?: string
  select: SelectConfig
  sync: SyncConfig
  serve: Pick<ServeConfig, 'listen' | 'origin_url' | 'public_url' | 'origin_fallback_mirrors'>
  torrent: TorrentConfig
  zsync: ZsyncConfig
}

/**
 * Builds the metalink (or `options.format`) of `options.path` for `options.clientIp`.
 * @returns the document model and its rendered text (bytes for `.torrent` and `.zsync`)
 * @throws UsageError for a bad client address; MbError FILE_NOT_FOUND when the path is not
 *         indexed, FORMAT_UNAVAILABLE when the file has no current data for the format
 */
export async function offlineMetalink(database: Database, config: OfflineSettings, options: OfflineOptions): Promise<{doc: MetalinkDocument; text: string | Buffer}> {
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
  const context = selectionContext(facts, await configuredGeo(config), file, mirrors, compileSelectOptions(config.select, syncSelectOptions(config.root, config.sync)))
  const selection = select(context.client, context.file, context.mirrors, context.options, false)
  const stored = await readStoredHashes(database, path)
  const present = await database.db
    .selectFrom('file')
    .select([sql<boolean>`sha1_pieces IS NOT NULL`.as('torrent'), 'zsync_block_size'])
    .where('path', '=', path)
    .executeTakeFirst()
  let fresh = hashesFresh(stored)
  if (fresh && config.root) fresh = hashesFresh(stored, await stat(join(config.root, path)).catch(() => ({size: -1, mtimeMs: -1})))
  const baseUrl = withTrailingSlash(options.baseUrl ?? config.serve.public_url ?? `http://${config.serve.listen}/`)
  const doc = buildDocument({
    path,
    size: file.size,
    mtime: file.mtime,
    stored,
    hashesFresh: fresh,
    selection,
    baseUrl,
    originBase: new BaseUrls(baseUrl, config.serve.origin_url).originOf(baseUrl),
    maxUrls: options.maxUrls ?? context.options.metalinkMaxMirrors,
    originFallbackMirrors: config.serve.origin_fallback_mirrors,
    formats: fresh ? {torrent: present?.torrent === true, zsync: present?.zsync_block_size != null, metaurl: config.torrent.meta4_metaurl} : undefined,
    now: options.now,
  })
  const format = options.format ?? 'meta4'
  if (format === 'meta4' || format === 'metalink') return {doc, text: format === 'metalink' ? renderMetalink3(doc) : renderMeta4(doc)}
  return {doc, text: await clientFormat(database, config, doc, format, fresh ? (stored?.sha1 ?? null) : null)}
}

/** The `.torrent`, magnet link or `.zsync` of `doc`, from the store. */
async function clientFormat(database: Database, config: OfflineSettings, doc: MetalinkDocument, format: 'torrent' | 'magnet' | 'zsync', sha1: string | null): Promise<string | Buffer> {
  // One document, made once: its caches hold that one version.
  const once = {entries: 1, bytes: Number.POSITIVE_INFINITY}
  const store = new FormatStore(database, {zsyncMinSize: zsyncMinSize(config.zsync), trackers: config.torrent.trackers, torrentCache: once, zsyncCache: once})
  const file = {path: doc.path, size: doc.size, mtime: doc.mtime, sha1}
  const data =
    sha1 === null
      ? {status: 404 as const, reason: `No current hashes of ${doc.path}: it has not been hashed since it last changed (run \`mb index --hashes\`).`}
      : format === 'zsync'
        ? await store.zsync(file)
        : await store.torrent(file)
  if (isUnavailable(data)) throw new MbError(data.reason, {code: data.status === 404 ? 'FORMAT_UNAVAILABLE' : 'FAILED'})
  if (format === 'zsync') return renderZsync(data as ZsyncControl, zsyncUrls(doc))
  const info = data as TorrentInfo
  return format === 'torrent' ? torrentBody(doc, info, store.trackers) : `${magnetBody(doc, info, store.trackers)}\n`
}
