/**
 * `mb file lookup`: what the index knows about one file (or every file matching a glob),
 * which mirrors hold it, and, for a given client address, the ranked choice `mb serve`
 * would make with the reason for every mirror it passes over ("explain").
 */
import type {SyncConfig} from '../sync/config.js'
import picomatch from 'picomatch'
import type {Database} from '../db/index.js'
import {MbError, UsageError} from '../errors.js'
import {selectUnderRule} from '../rules/apply.js'
import {listRules} from '../rules/registry.js'
import {compileRules, type RuleSet} from '../rules/rule.js'
import {type Candidate, compileMirrors, compileSelectOptions, mirrorUrl, selectionContext, type SelectFile, type SelectionContext, type SelectMirror} from '../select/index.js'
import {syncSelectOptions} from '../sync/trace.js'
import {retryRule, TIER_CANDIDATES, tierIndex, tierSize} from '../select/retry.js'
import type {SelectConfig} from '../select/config.js'
import {clientFromFlag, configuredGeo, type GeoSettings} from './client.js'
import {escapeLike} from '../db/sql.js'
import {hasDigests, hashesMatchVersion} from '../origin/freshness.js'
import {readLinks, resolveLinks} from '../origin/links.js'
import {trimLeadingSlashes} from '../text.js'
import {unixIso} from '../time.js'
import {type CopyCheck, copyChecks} from '../probe/content-store.js'

/** A mirror holding the file, with the URL a client of the given scheme would get. */
export interface HoldingMirror {
  id: number
  identifier: string
  country: string | null
  /** Full URL (path percent-encoded), or null when the mirror has no usable URL. */
  url: string | null
  /** How mb knows: its last scan listed this version (`scan`), or its sync trace vouched for it (`trace`, `select.trust_trace`) and no scan has decided yet. */
  by: 'scan' | 'trace'
}

/** A mirror copy known to differ from the origin (from the last scan). */
export interface StaleCopy {
  identifier: string
  size: number
  /** Unix seconds (UTC), or null when the listing had no mtime. */
  mtime: number | null
}

/** A mirror copy of this version that a content check found corrupt (`mb probe --content`). */
export interface CorruptCopy {
  identifier: string
  /** 0-based index of the SHA-1 piece that did not match. */
  piece: number
  /** When the mismatch was found, ISO 8601 UTC. */
  found_at: string
}

/** What content checks recorded of one mirror's copy of this version (`mirror_file_check`; src/lib/probe/content-store.ts). */
export type CheckedCopy = Omit<CopyCheck, 'mirror_id'> & {identifier: string}

/** The `--client-ip` explanation: the selection for that client. */
export interface LookupExplain {
  client: {ip: string; https: boolean; country: string | null; continent: string | null; asn: number | null; latitude: number | null; longitude: number | null}
  /** Winning pool, or null when the origin serves the file. */
  realm: string | null
  /** How the mirrors were ranked (`select.ranking`): `geo` (pools and distance) or `score` (score alone, one pool). */
  ranking: 'geo' | 'score'
  /** Why the origin serves the file (when it does). */
  origin: {reason: string; detail: string} | null
  /**
   * The redirect rule that matches this client and file (tried before selection), or null:
   * `url` sends the client to `url` with `status` (the ranking below is then unused),
   * `mirrors` limits `ranked` to its mirrors, `origin` delivers locally.
   */
  rule: {name: string; target: string; url: string | null; status: number | null} | null
  /** `note`: why the mirror ranks after others of its pool (beyond the distance factor, no IPv6 for an IPv6 client), else null. */
  ranked: Array<{rank: number; realm: string; mirror: string; country: string | null; url: string; distance_km: number | null; note: string | null}>
  excluded: Array<{mirror: string; reason: string; detail: string}>
  /**
   * The retry rule of `mb serve` (docs/selection.md, "Retries"), or null when retries are off:
   * `attempt` (1 = a first request; `--attempt N`) goes to `goes_to`, a mirror's name, or
   * when no mirror is ranked `origin` or `rule NAME` (the redirect rule that answers);
   * `rule` says it in words.
   */
  retry: {window_seconds: number; attempt: number; goes_to: string; rule: string} | null
}

/** One looked-up file. Sizes in bytes, mtime in Unix seconds (UTC) and ISO 8601. */
export interface FileLookup {
  /** The file's canonical path: the one looked up, or its target when symlinks lie on it (see `requested`). */
  path: string
  /** The path asked for, when symlinks on it led to `path` (null otherwise). */
  requested: string | null
  size: number
  mtime: number
  mtime_utc: string
  /** The origin no longer holds the file: it is kept and redirected while mirrors hold it (`serve.mirror_only`, src/lib/origin/mirror-only.ts). */
  mirror_only: boolean
  /** Digests when hashed for this exact size and mtime (`mb index --hashes`), else null. */
  hashes: {md5: string; sha1: string; sha256: string} | null
  mirrors: HoldingMirror[]
  stale: StaleCopy[]
  /** Copies found corrupt: out of the mirror set until a scan sees them change or a content check passes. */
  corrupt: CorruptCopy[]
  /** What content checks read of each copy of this version: pieces of the current pass, the last whole check, the last check that could not judge. */
  checks: CheckedCopy[]
  explain?: LookupExplain
}

export interface LookupOptions {
  /** An origin-relative path, or a picomatch glob (`*.iso`, `iso/**`, `{a,b}/*.tar.xz`). */
  pattern: string
  /** Explain the selection for this client address. */
  clientIp?: string
  /** The client came over HTTPS (URLs use https_url; mirrors without one are excluded). */
  https?: boolean
  /** At most this many files for a glob (default 1000). */
  limit?: number
  /** Clock for scan ages and maintenance windows (Unix seconds); default now. */
  now?: number
  /** Show where this retry attempt of the client would go (1-based; default 1). */
  attempt?: number
  /** The client's country instead of GeoIP's (ISO 3166-1 alpha-2, as a trusted `?country=`); needs `clientIp`. */
  country?: string
}

/**
 * A SQL LIKE pattern that matches a superset of the glob's matches: the literal directory
 * prefix (picomatch.scan's `base`), `%`, and the literal tail after the last glob character.
 * Patterns without a `/` match basenames anywhere (picomatch `basename` option).
 */
export function globToLike(glob: string): string {
  const {base, glob: rest} = picomatch.scan(glob)
  const tail = /[^*?[\]{}()!+@|\\]*$/.exec(rest)?.[0] ?? ''
  const prefix = glob.includes('/') ? (base ? `${base}/` : '') : ''
  return `${escapeLike(prefix)}%${escapeLike(tail)}`
}

const FILE_COLUMNS = ['id', 'path', 'size', 'mtime', 'mirrors', 'md5', 'sha1', 'sha256', 'hashed_size', 'hashed_mtime', 'mirror_only'] as const

/**
 * The index rows for `pattern`: the path itself, or else (when it is a glob) up to `limit`
 * matching paths in path order, or else the file its symlinks lead to (`viaLink`).
 * @throws MbError `NO_MATCH` when a glob matches nothing, `FILE_NOT_FOUND` for a missing path
 */
async function findFileRows(database: Database, pattern: string, limit: number) {
  // A name that merely contains glob characters (`distro [beta].iso`) is looked up as itself first.
  let rows = await database.db
    .selectFrom('file')
    .select([...FILE_COLUMNS])
    .where('path', '=', pattern)
    .execute()
  const isGlob = rows.length === 0 && picomatch.scan(pattern).isGlob
  if (isGlob) {
    const match = picomatch(pattern, {dot: true, basename: !pattern.includes('/')})
    const candidates = await database.db.selectFrom('file').select(['id', 'path']).where('path', 'like', globToLike(pattern)).orderBy('path').execute()
    const wanted = candidates
      .filter((r) => match(r.path))
      .slice(0, limit)
      .map((r) => r.id)
    rows =
      wanted.length === 0
        ? []
        : await database.db
            .selectFrom('file')
            .select([...FILE_COLUMNS])
            .where('id', 'in', wanted)
            .orderBy('path')
            .execute()
    if (rows.length === 0) throw new MbError(`No indexed file matches ${pattern}. Check the pattern (quote it so the shell does not expand it) or run \`mb index\`.`, {code: 'NO_MATCH'})
  } else if (rows.length === 0) {
    const canonical = resolveLinks(await readLinks(database.db), pattern)
    if (canonical !== undefined) {
      rows = await database.db
        .selectFrom('file')
        .select([...FILE_COLUMNS])
        .where('path', '=', canonical)
        .execute()
      if (rows.length > 0) return {rows, viaLink: true}
    }
    throw new MbError(`${pattern} is not in the origin index; check the path (relative to the root, e.g. iso/distro.iso) or run \`mb index\`.`, {code: 'FILE_NOT_FOUND'})
  }
  return {rows, viaLink: false}
}

/** The differing copies the mirrors' last scans saw of the files `fileIds`: file id → mirror id → size and mtime (Unix seconds). */
async function staleCopies(database: Database, fileIds: number[]): Promise<Map<number, Map<number, {size: number; mtime: number | null}>>> {
  const staleRows = await database.db.selectFrom('mirror_file_stale').select(['mirror_id', 'file_id', 'size', 'mtime']).where('file_id', 'in', fileIds).execute()
  const staleByFile = new Map<number, Map<number, {size: number; mtime: number | null}>>()
  for (const s of staleRows) {
    let map = staleByFile.get(Number(s.file_id))
    if (!map) {
      map = new Map()
      staleByFile.set(Number(s.file_id), map)
    }
    map.set(Number(s.mirror_id), {size: Number(s.size), mtime: s.mtime === null ? null : Number(s.mtime)})
  }
  return staleByFile
}

/** The copies of the files `fileIds` that sync traces vouched for (`mirror_file_trace`) at their current versions: file id → mirror ids. */
async function tracedCopies(database: Database, fileIds: number[]): Promise<Map<number, Set<number>>> {
  if (fileIds.length === 0) return new Map()
  const rows = await database.db
    .selectFrom('mirror_file_trace as t')
    .innerJoin('file as f', (join) => join.onRef('f.id', '=', 't.file_id').onRef('f.size', '=', 't.size').onRef('f.mtime', '=', 't.mtime'))
    .select(['t.mirror_id', 't.file_id'])
    .where('t.file_id', 'in', fileIds)
    .execute()
  const byFile = new Map<number, Set<number>>()
  for (const r of rows) {
    const set = byFile.get(Number(r.file_id)) ?? new Set<number>()
    byFile.set(Number(r.file_id), set)
    set.add(Number(r.mirror_id))
  }
  return byFile
}

/** The corrupt copies of the files `fileIds` at their current versions: file id → mirror id → piece and time (Unix seconds). */
async function corruptCopies(database: Database, fileIds: number[]): Promise<Map<number, Map<number, {piece: number; foundAt: number}>>> {
  const rows = await database.db
    .selectFrom('mirror_file_bad as b')
    .innerJoin('file as f', (join) => join.onRef('f.id', '=', 'b.file_id').onRef('f.size', '=', 'b.size').onRef('f.mtime', '=', 'b.mtime'))
    .select(['b.mirror_id', 'b.file_id', 'b.piece', 'b.found_at'])
    .where('b.file_id', 'in', fileIds)
    .execute()
  const byFile = new Map<number, Map<number, {piece: number; foundAt: number}>>()
  for (const r of rows) {
    const map = byFile.get(Number(r.file_id)) ?? new Map()
    byFile.set(Number(r.file_id), map)
    map.set(Number(r.mirror_id), {piece: Number(r.piece), foundAt: Math.floor(new Date(r.found_at).getTime() / 1000)})
  }
  return byFile
}

/**
 * The differing copies the mirrors' last scans saw of one version of one file (for the
 * served mirror list, whose snapshot does not hold them): mirror id → size in bytes and
 * mtime in Unix seconds (null when the listing had none). Empty when the index holds
 * another version of `file` by now (its stale records went with that change).
 * @throws whatever the database driver throws (the caller decides what a list without them says)
 */
export async function staleCopiesOf(database: Database, file: {path: string; size: number; mtime: number}): Promise<Map<number, {size: number; mtime: number | null}>> {
  const rows = await database.db
    .selectFrom('mirror_file_stale as s')
    .innerJoin('file as f', 'f.id', 's.file_id')
    .select(['s.mirror_id', 's.size', 's.mtime'])
    .where('f.path', '=', file.path)
    .where('f.size', '=', file.size)
    .where('f.mtime', '=', file.mtime)
    .execute()
  return new Map(rows.map((r) => [Number(r.mirror_id), {size: Number(r.size), mtime: r.mtime === null ? null : Number(r.mtime)}]))
}

/**
 * Looks up a path or glob in the origin index.
 *
 * @throws UsageError for a bad `--client-ip` or an empty pattern; MbError `FILE_NOT_FOUND`
 *         when the path is not indexed, `NO_MATCH` when a glob matches nothing.
 */
export async function lookupFiles(database: Database, config: GeoSettings & {root?: string; select: SelectConfig; sync: SyncConfig}, options: LookupOptions): Promise<FileLookup[]> {
  const pattern = trimLeadingSlashes(options.pattern)
  if (!pattern) throw new UsageError('Give an origin-relative path or a glob, e.g. `mb file lookup iso/distro.iso` or `mb file lookup "*.iso"`.')
  const https = options.https ?? false
  const facts = options.clientIp === undefined ? undefined : clientFromFlag(options.clientIp, https, options.country)
  const limit = options.limit ?? 1000

  const {rows, viaLink} = await findFileRows(database, pattern, limit)
  const mirrors = compileMirrors(await database.db.selectFrom('mirror').selectAll().orderBy('id').execute())
  const staleByFile = await staleCopies(
    database,
    rows.map((r) => r.id),
  )
  const corruptByFile = await corruptCopies(
    database,
    rows.map((r) => r.id),
  )
  const checksByFile = await copyChecks(
    database.db,
    rows.map((r) => r.id),
  )
  const tracedByFile = await tracedCopies(
    database,
    rows.map((r) => r.id),
  )

  const geo = facts === undefined ? undefined : await configuredGeo(config)
  const rules = facts === undefined ? undefined : compileRules(await listRules(database.db), mirrors)
  const selectOptions = compileSelectOptions(config.select, syncSelectOptions(config.root, config.sync))
  if (options.now !== undefined) selectOptions.now = () => options.now!

  return rows.map((r) => {
    const size = Number(r.size)
    const mtime = Number(r.mtime)
    const stale = staleByFile.get(Number(r.id)) ?? new Map()
    const corrupt = corruptByFile.get(Number(r.id)) ?? new Map()
    const fresh = hasDigests(r) && hashesMatchVersion(r, {size, mtime})
    const held: HoldingMirror[] = []
    for (const id of r.mirrors) {
      const m = mirrors.get(Number(id))
      if (m) held.push({id: m.id, identifier: m.identifier, country: m.country, url: safeUrl(m, r.path, https), by: tracedByFile.get(Number(r.id))?.has(m.id) ? 'trace' : 'scan'})
    }
    const result: FileLookup = {
      path: r.path,
      requested: viaLink ? pattern : null,
      size,
      mtime,
      mtime_utc: unixIso(mtime),
      mirror_only: r.mirror_only === true,
      hashes: fresh ? {md5: r.md5!, sha1: r.sha1!, sha256: r.sha256!} : null,
      mirrors: held,
      stale: [...stale].map(([id, copy]) => ({identifier: mirrors.get(id)?.identifier ?? String(id), size: copy.size, mtime: copy.mtime})),
      corrupt: [...corrupt].map(([id, bad]) => ({identifier: mirrors.get(id)?.identifier ?? String(id), piece: bad.piece, found_at: unixIso(bad.foundAt)})),
      checks: (checksByFile.get(Number(r.id)) ?? []).map(({mirror_id, ...c}) => ({identifier: mirrors.get(mirror_id)?.identifier ?? String(mirror_id), ...c})),
    }
    if (facts !== undefined && geo !== undefined) {
      // A mirror-only file gets no origin exception: mb serve redirects it (serve/delivery/mirror-only.ts).
      const file: SelectFile = {path: r.path, size, mtime, mirrors: r.mirrors.map(Number), stale, corrupt, originLacks: r.mirror_only === true}
      result.explain = explain(selectionContext(facts, geo, file, mirrors, selectOptions), rules, options.attempt ?? 1)
    }
    return result
  })
}

/** The explanation of one file's selection: `select()` with every exclusion, in JSON shape. */
function explain(context: SelectionContext, rules: RuleSet | undefined, attempt: number): LookupExplain {
  const {client, file, mirrors, options} = context
  const match = rules?.match(file.path, client)
  const s = selectUnderRule(match, client, file, mirrors, options, true)
  return {
    client: {
      ip: client.ip,
      https: client.https,
      country: client.country ?? null,
      continent: client.continent ?? null,
      asn: client.asn ?? null,
      latitude: client.latitude ?? null,
      longitude: client.longitude ?? null,
    },
    realm: s.realm,
    ranking: s.ranking ?? 'geo',
    origin: s.origin ?? null,
    rule: s.rule ? {name: s.rule.name, target: s.rule.target, url: s.rule.url ?? null, status: s.rule.target === 'url' ? match!.rule.record.status : null} : null,
    ranked: s.ranked.map((c) => ({
      rank: c.rank,
      realm: c.realm,
      mirror: c.mirror.identifier,
      country: c.mirror.country,
      url: c.url,
      distance_km: c.distanceKm === undefined ? null : Math.round(c.distanceKm),
      note: c.note ?? null,
    })),
    excluded: s.excluded.map((e) => ({mirror: e.mirror.identifier, reason: e.reason, detail: e.detail})).sort((a, b) => a.mirror.localeCompare(b.mirror)),
    // A `url` rule answers every request, repeats included, before any mirror is chosen.
    retry:
      s.rule?.target === 'url'
        ? retryExplained(options.retryWindowSeconds, attempt, [], 0, `rule ${s.rule.name}`)
        : retryExplained(options.retryWindowSeconds, attempt, s.ranked, options.maxAlternatives, 'origin'),
  }
}

/**
 * Where `attempt` goes among `ranked` under the retry rule (src/lib/select/retry.ts): the
 * attempt's member of the client's tier, among the first `linkCount` candidates (those a
 * redirect names), at least `TIER_CANDIDATES`; when no mirror is ranked, every attempt goes
 * where the first went (`instead`: the origin, or the `url` redirect rule that answers before
 * any selection), and the rule says so rather than describing a cycle there is not. Null when
 * retries are off.
 */
function retryExplained(windowSeconds: number, attempt: number, ranked: readonly Candidate[], linkCount: number, instead: string): LookupExplain['retry'] {
  if (windowSeconds <= 0) return null
  const named = ranked.slice(0, Math.max(TIER_CANDIDATES, linkCount))
  const size = tierSize(named)
  if (size === 0) return {window_seconds: windowSeconds, attempt, goes_to: instead, rule: 'no mirror is chosen for this client, so every repeated request goes there too (nothing to cycle through)'}
  return {window_seconds: windowSeconds, attempt, goes_to: named[tierIndex(attempt, size)].mirror.identifier, rule: retryRule(windowSeconds)}
}

function safeUrl(m: SelectMirror, path: string, https: boolean): string | null {
  try {
    return mirrorUrl(m, path, https)
  } catch {
    return null
  }
}
