/**
 * The mirror registry: add, edit, remove, enable/disable, list and resolve mirrors in the
 * `mirror` table, plus the stable public (JSON) shape of a mirror.
 *
 * Every write validates first (see `validate.ts`) and runs in one transaction, so a bad value
 * or a failed check changes nothing. Names resolve as: exact identifier, then the same name
 * ignoring case, then an unambiguous case-insensitive prefix.
 */
import {DEFAULT_SIGN_TTL_SECONDS} from '../sign.js'
import {userInfo} from 'node:os'
import {type Kysely, type Selectable, sql, type Transaction} from 'kysely'
import type {DB, MirrorRow, RemovedMirrorTable} from '../db/schema.js'
import {MbError, UsageError} from '../errors.js'
import {CLEARABLE, CLEARED_VALUES, checkMirrorRow, validateIdentifier, validateMirrorInput} from './validate.js'
import {checkPrefixes, impliedContinent, normalizeContinent, normalizeCountry} from './location.js'
import {FIELD_FLAGS, type MirrorInput, type MirrorValues} from './fields.js'
import {escapeLike} from '../db/sql.js'
import {redacted} from './public.js'

export type {MirrorInput} from './fields.js'

type Db = Kysely<DB> | Transaction<DB>

/** Fields whose change makes earlier scan results describe another tree: edit sets needs_rescan. */
const SCAN_FIELDS = ['http_url', 'https_url', 'rsync_url', 'ftp_url', 'base_path', 'include_patterns', 'exclude_patterns'] as const

/** The base URLs: a change sets `url_changed_at` (out of selection until the next successful scan). */
const URL_FIELDS = ['http_url', 'https_url', 'rsync_url', 'ftp_url'] as const

/**
 * The probe status (`mirror.status`, src/lib/probe/state.ts) without the checks of the
 * schemes whose URL changed (`http/…` for http_url, `https/…` for https_url).
 */
function dropSchemeChecks(status: unknown, changed: readonly string[]): Record<string, unknown> {
  const raw = (typeof status === 'string' ? JSON.parse(status) : status) as {checks?: Record<string, unknown>} | null
  const value: Record<string, unknown> = raw && typeof raw === 'object' ? {...raw} : {}
  const checks: Record<string, unknown> = value.checks && typeof value.checks === 'object' ? {...value.checks} : {}
  for (const key of Object.keys(checks)) {
    if ((key.startsWith('http/') && changed.includes('http_url')) || (key.startsWith('https/') && changed.includes('https_url'))) delete checks[key]
  }
  return {...value, checks}
}

/** A new mirror's values: the cleared value of every clearable field, and the rest. */
const DEFAULTS = {
  ...CLEARED_VALUES,
  score: 100,
  enabled: true,
  country_only: false,
  region_only: false,
  as_only: false,
  prefix_only: false,
  fallback: false,
  sign_ttl_seconds: DEFAULT_SIGN_TTL_SECONDS,
} satisfies Required<Omit<MirrorValues, 'identifier'>>

/**
 * Finds a mirror by name: the exact identifier wins; then the same identifier ignoring case;
 * then a case-insensitive prefix that matches exactly one mirror.
 * @throws UsageError (exit 2, code AMBIGUOUS_MIRROR) when a prefix matches several mirrors,
 *         listing them; UsageError INVALID_MIRROR_FIELD when `name` is not a name `mirror add`
 *         accepts (whitespace, control characters); MbError (exit 1, code MIRROR_NOT_FOUND)
 *         when nothing matches
 */
export async function resolveMirror(db: Db, name: string): Promise<MirrorRow> {
  if (name === '') throw new UsageError('A mirror name is required (see `mb mirror list`).', 'USAGE')
  // What `mirror add` would refuse names no mirror: refused here too, never trimmed into one.
  const wanted = validateIdentifier(name)
  const exact = await db.selectFrom('mirror').selectAll().where('identifier', '=', wanted).executeTakeFirst()
  if (exact) return exact
  const caseless = await db.selectFrom('mirror').selectAll().where(sql<string>`lower(identifier)`, '=', wanted.toLowerCase()).execute()
  if (caseless.length === 1) return caseless[0]
  const matches = await db
    .selectFrom('mirror')
    .selectAll()
    .where(sql<boolean>`identifier ILIKE ${`${escapeLike(wanted)}%`}`)
    .orderBy('identifier')
    .limit(51)
    .execute()
  if (matches.length === 1) return matches[0]
  if (matches.length > 1) {
    const names = matches.slice(0, 50).map((m) => m.identifier)
    throw new UsageError(`Mirror name "${wanted}" is ambiguous; it matches: ${names.join(', ')}${matches.length > 50 ? ', …' : ''}. Give the full name.`, 'AMBIGUOUS_MIRROR')
  }
  throw new MbError(`No mirror named "${wanted}". Run \`mb mirror list\` to see the registered mirrors.`, {code: 'MIRROR_NOT_FOUND'})
}

async function assertNameFree(db: Db, identifier: string, exceptId?: number): Promise<void> {
  let query = db.selectFrom('mirror').select('identifier').where(sql<string>`lower(identifier)`, '=', identifier.toLowerCase())
  if (exceptId !== undefined) query = query.where('id', '!=', exceptId)
  const clash = await query.executeTakeFirst()
  if (clash) {
    throw new MbError(`A mirror named "${clash.identifier}" already exists. Use \`mb mirror edit ${clash.identifier}\` to change it, or pick another name.`, {code: 'MIRROR_EXISTS'})
  }
}

function isUniqueViolation(error: unknown): boolean {
  return (error as {code?: string})?.code === '23505' || /duplicate key value/.test(String((error as Error)?.message))
}

/** The largest mirror id: `mirror.id` and the files' mirror sets are `smallint`. */
export const MAX_MIRROR_ID = 32_767

/** The statistics tables that keep a mirror's id after the mirror is removed (no foreign key). */
const STATS_TABLES = ['stats_daily', 'stats_monthly'] as const

/**
 * Picks the lowest mirror id not in use, for a new mirror, inside the add transaction.
 *
 * `LOCK TABLE mirror IN SHARE ROW EXCLUSIVE MODE` (it conflicts with itself and with every
 * write to the table) makes concurrent adds on PostgreSQL take turns until commit, so two
 * adds never pick the same id. Probe and scan history of a removed mirror went with it (ON
 * DELETE CASCADE), but its download statistics stay (they have no foreign key): before the
 * id is reused they move to `-id`, the id the statistics reports show as a removed mirror
 * (`#-id`), merged with any earlier removed mirror of that id, so no count of the old mirror
 * is ever reported under the new one. The identity sequence records the highest id handed
 * out; a new id above it was never used and needs no such move. When the sequence was never
 * used (ids written by hand), every id is treated as used.
 * @returns an id in 1..{@link MAX_MIRROR_ID}
 * @throws MbError MIRROR_LIMIT when every id is taken
 */
async function takeFreeId(trx: Transaction<DB>): Promise<number> {
  await sql`LOCK TABLE mirror IN SHARE ROW EXCLUSIVE MODE`.execute(trx)
  const {rows} = await sql<{id: number | null}>`
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM mirror WHERE id = 1) THEN 1
      ELSE (SELECT min(m.id) + 1 FROM mirror m
            WHERE m.id < ${MAX_MIRROR_ID} AND NOT EXISTS (SELECT 1 FROM mirror n WHERE n.id = m.id + 1))
    END AS id`.execute(trx)
  const id = rows[0]?.id === null || rows[0]?.id === undefined ? null : Number(rows[0].id)
  if (id === null) {
    throw new MbError(`Cannot add the mirror: all ${MAX_MIRROR_ID} mirror ids are in use. Remove mirrors that are gone (\`mb mirror remove NAME\`) to free ids, then add it again.`, {
      code: 'MIRROR_LIMIT',
    })
  }
  // An id above every id handed out so far has no statistics to move (the common case: no
  // scan of the statistics tables, which have no index on mirror_id).
  const {rows: seq} = await sql<{high: number | null}>`SELECT pg_sequence_last_value(pg_get_serial_sequence('mirror', 'id')::regclass) AS high`.execute(trx)
  const highest = seq[0]?.high === null || seq[0]?.high === undefined ? MAX_MIRROR_ID : Number(seq[0].high)
  if (id <= highest) for (const table of STATS_TABLES) await retireStatsId(trx, table, id)
  return id
}

/** Moves the rows of mirror id `id` in `table` to `-id`, adding into rows already there. */
async function retireStatsId(trx: Transaction<DB>, table: (typeof STATS_TABLES)[number], id: number): Promise<void> {
  const key = table === 'stats_daily' ? sql.ref('day') : sql.ref('month')
  const t = sql.table(table)
  await sql`
    WITH moved AS (DELETE FROM ${t} WHERE mirror_id = ${id}::smallint RETURNING *)
    INSERT INTO ${t} (${key}, path, mirror_id, country, downloads, bytes, other_requests)
    SELECT ${key}, path, (-mirror_id)::smallint, country, downloads, bytes, other_requests FROM moved
    ON CONFLICT (${key}, path, mirror_id, country) DO UPDATE SET
      downloads = ${t}.downloads + EXCLUDED.downloads,
      bytes = ${t}.bytes + EXCLUDED.bytes,
      other_requests = ${t}.other_requests + EXCLUDED.other_requests`.execute(trx)
}

/** Options of {@link addMirror} and {@link editMirror}. */
export interface WriteOptions {
  /** Store `--prefix` values that are too broad or reserved (`--force`; see `prefixOverride`). */
  force?: boolean
}

/**
 * Registers a new mirror. `input.identifier` is required, and at least one of http_url /
 * https_url. A country implies its continent unless `continent` is given. Unset fields take
 * the defaults (score 100, enabled, no flags, whole tree).
 * @returns the stored row
 * The mirror gets the lowest free id (ids of removed mirrors are reused; see `takeFreeId`).
 * @throws UsageError on a bad value (nothing written); MbError MIRROR_EXISTS (exit 1) when
 *         the name is taken (names are unique ignoring case); MbError MIRROR_LIMIT when all
 *         {@link MAX_MIRROR_ID} ids are in use
 */
export async function addMirror(db: Kysely<DB>, input: MirrorInput, options: WriteOptions = {}): Promise<MirrorRow> {
  if (input.identifier === undefined) throw new UsageError('A mirror name is required: mb mirror add NAME --http-url URL …')
  const values = validateMirrorInput(input)
  checkPrefixes(values.prefixes ?? [], options.force === true)
  const identifier = values.identifier!
  const row = {...DEFAULTS, ...values, identifier}
  if (row.country && values.continent === undefined) row.continent = impliedContinent(row.country) ?? null
  checkMirrorRow(row)
  return db.transaction().execute(async (trx) => {
    await assertNameFree(trx, identifier)
    const id = await takeFreeId(trx)
    try {
      const stored = await trx
        .insertInto('mirror')
        .values({...row, id})
        .returningAll()
        .executeTakeFirstOrThrow()
      // Inserts that leave the id to the column default then start above every id in use.
      // The sequence keeps the highest id ever handed out (see takeFreeId), at least max(id).
      await sql`SELECT setval(pg_get_serial_sequence('mirror', 'id'), greatest((SELECT max(id) FROM mirror), ${id}::int, coalesce(pg_sequence_last_value(pg_get_serial_sequence('mirror', 'id')::regclass), 0)))`.execute(
        trx,
      )
      return stored
    } catch (error) {
      if (isUniqueViolation(error)) await assertNameFree(trx, identifier)
      throw error
    }
  })
}

/** Column names accepted by `--clear`, keyed by every spelling an operator may use. */
function clearTargets(name: string): Array<keyof MirrorValues> {
  const key = name.trim().toLowerCase().replace(/^--/, '').replace(/-/g, '_')
  if (['lat', 'lon', 'latitude', 'longitude', 'location', 'coordinates'].includes(key)) return ['latitude', 'longitude']
  // A flag's name (`sign`, `sign-secret-file`, `prefix`) names its column (`sign_scheme`, `sign_secret`, `prefixes`).
  const byFlag = Object.entries(FIELD_FLAGS).find(([, flag]) => flag.slice(2).replace(/-/g, '_') === key)?.[0]
  const column = (byFlag ?? key) as keyof MirrorValues
  if (!(column in CLEARABLE)) {
    const names = Object.keys(CLEARABLE).map((c) =>
      Object.entries(FIELD_FLAGS)
        .find(([k]) => k === c)![1]
        .slice(2),
    )
    throw new UsageError(`Cannot clear "${name}": clearable fields are ${names.join(', ')}.`)
  }
  return [column]
}

/**
 * Changes the given fields of a mirror; fields not given stay as they are. An empty value
 * (`--asn ''`) or a name in `clear` (`--clear asn`) clears an optional field. Setting a new
 * country without a continent sets the country's continent. Changing a URL, base_path or
 * include/exclude patterns sets `needs_rescan`. `input.identifier` renames the mirror.
 * @returns the updated row (and whether anything changed)
 * @throws UsageError on a bad value or nothing to change (nothing written);
 *         MbError MIRROR_NOT_FOUND / MIRROR_EXISTS
 */
export async function editMirror(db: Kysely<DB>, name: string, input: MirrorInput, clear: string[] = [], options: WriteOptions = {}): Promise<{mirror: MirrorRow; changed: string[]}> {
  const values = validateMirrorInput(input)
  checkPrefixes(values.prefixes ?? [], options.force === true)
  for (const field of clear.flatMap(clearTargets)) {
    if (input[field as keyof MirrorInput] !== undefined && JSON.stringify(values[field]) !== JSON.stringify(CLEARABLE[field])) {
      throw new UsageError(`${FIELD_FLAGS[field as keyof MirrorInput]} is both set and cleared; give one or the other.`)
    }
    ;(values as Record<string, unknown>)[field] = CLEARABLE[field]
  }
  if (Object.keys(values).length === 0) throw new UsageError(`Nothing to change for mirror "${name}": give at least one field flag (see \`mb mirror edit --help\`).`)
  return db.transaction().execute(async (trx) => {
    const current = await resolveMirror(trx, name)
    if (values.country && values.continent === undefined) values.continent = impliedContinent(values.country) ?? null
    if (values.identifier !== undefined && values.identifier !== current.identifier) await assertNameFree(trx, values.identifier, current.id)
    const merged = {...current, ...values}
    checkMirrorRow(merged)
    const changed = (Object.keys(values) as Array<keyof MirrorValues>).filter((k) => JSON.stringify(values[k]) !== JSON.stringify(current[k]))
    if (changed.length === 0) return {mirror: current, changed}
    const update: Record<string, unknown> = {}
    for (const key of changed) update[key] = values[key]
    const urlChanged = changed.some((k) => (URL_FIELDS as readonly string[]).includes(k))
    // A new URL is a new tree: out of selection ("URL changed, awaiting scan") until its scan
    // says what it holds; other scan fields only need a fresh scan.
    if (urlChanged) update.url_changed_at = new Date()
    else if (changed.some((k) => (SCAN_FIELDS as readonly string[]).includes(k))) update.needs_rescan = true
    // A probe result belongs to the URL it probed: a new URL's scheme counts as never probed
    // (rule `unprobed`) until the next probe, never as the old URL's up or down, and its
    // per-family checks and Range support are learnt again.
    if (changed.includes('http_url')) update.http_up = null
    if (changed.includes('https_url')) update.https_up = null
    if (changed.includes('http_url') || changed.includes('https_url')) {
      update.status = JSON.stringify(dropSchemeChecks(current.status, changed))
      update.range_ok = null
      update.synced_at = null
      update.sync_error = null
      update.sync_validator = null
    }
    try {
      const mirror = await trx.updateTable('mirror').set(update).where('id', '=', current.id).returningAll().executeTakeFirstOrThrow()
      return {mirror, changed}
    } catch (error) {
      if (isUniqueViolation(error) && values.identifier) await assertNameFree(trx, values.identifier, current.id)
      throw error
    }
  })
}

/** The OS user running this process, as a removal records it: the login name, else `uid N`. */
function osUser(): string {
  try {
    return userInfo().username
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`
  }
}

/** A removal of a mirror as `mb mirror list --removed` shows it (migration 0020). */
export type RemovedMirror = Selectable<RemovedMirrorTable>

/**
 * Every recorded removal, newest first: the mirror's id then, name, URLs (credentials
 * redacted when it was removed), when (UTC) and by whom.
 * @throws what the database driver throws
 */
export function listRemovedMirrors(db: Kysely<DB>): Promise<RemovedMirror[]> {
  return db.selectFrom('removed_mirror').selectAll().orderBy('removed_at', 'desc').orderBy('id', 'desc').execute()
}

/**
 * Removes a mirror, its stale-copy records (ON DELETE CASCADE) and its id from every file's
 * mirror set, in one transaction, and records the removal in `removed_mirror` (name, URLs
 * without credentials, when, and `options.removedBy` or the OS user), so that statistics and
 * `mb mirror list --removed` still name it.
 * Removal is destructive, so a name that only matched as a prefix is refused unless
 * `options.allowPrefix` is set (the CLI's `--yes`).
 * @returns the removed row
 * @throws MbError MIRROR_NOT_FOUND; UsageError AMBIGUOUS_MIRROR, or PREFIX_NOT_CONFIRMED
 */
export async function removeMirror(db: Kysely<DB>, name: string, options: {allowPrefix?: boolean; removedBy?: string} = {}): Promise<MirrorRow> {
  return db.transaction().execute(async (trx) => {
    const mirror = await resolveMirror(trx, name)
    if (!options.allowPrefix && mirror.identifier.toLowerCase() !== name.toLowerCase()) {
      throw new UsageError(
        `"${name}" matches the mirror ${mirror.identifier}. Removing deletes its records, so give the full name (mb mirror remove ${mirror.identifier}) or confirm the prefix with --yes.`,
        'PREFIX_NOT_CONFIRMED',
      )
    }
    await trx
      .updateTable('file')
      .set({mirrors: sql<number[]>`array_remove(mirrors, ${mirror.id}::smallint)`})
      .where(sql<boolean>`mirrors @> ARRAY[${mirror.id}::smallint]`)
      .execute()
    await trx.deleteFrom('mirror').where('id', '=', mirror.id).execute()
    await trx
      .insertInto('removed_mirror')
      .values({
        mirror_id: mirror.id,
        identifier: mirror.identifier,
        http_url: redacted(mirror.http_url),
        https_url: redacted(mirror.https_url),
        rsync_url: redacted(mirror.rsync_url),
        ftp_url: redacted(mirror.ftp_url),
        removed_by: options.removedBy ?? osUser(),
      })
      .execute()
    return mirror
  })
}

/**
 * Enables or disables a mirror (a disabled mirror keeps its records but is never selected).
 * @returns the row after the change and whether it changed (false when already in that state)
 * @throws MbError MIRROR_NOT_FOUND; UsageError AMBIGUOUS_MIRROR
 */
export async function setEnabled(db: Kysely<DB>, name: string, enabled: boolean): Promise<{mirror: MirrorRow; changed: boolean}> {
  return db.transaction().execute(async (trx) => {
    const current = await resolveMirror(trx, name)
    if (current.enabled === enabled) return {mirror: current, changed: false}
    const mirror = await trx.updateTable('mirror').set({enabled}).where('id', '=', current.id).returningAll().executeTakeFirstOrThrow()
    return {mirror, changed: true}
  })
}

/**
 * The operator's word that a suspect mirror (its last scan refused by the safety check,
 * `scan_refused_at` set, or too many corrupt copies found, `bad_copies_suspect_at` set) may
 * be used again with the file set of its last good scan: clears both. The next scan is
 * checked as before, and makes it suspect again when it is refused again; so does the next
 * content round that still finds too many corrupt copies.
 * @returns the row after the change and whether it changed (false when it was not suspect)
 * @throws MbError MIRROR_NOT_FOUND; UsageError AMBIGUOUS_MIRROR
 */
export async function trustScan(db: Kysely<DB>, name: string): Promise<{mirror: MirrorRow; changed: boolean}> {
  return db.transaction().execute(async (trx) => {
    const current = await resolveMirror(trx, name)
    if (current.scan_refused_at === null && current.bad_copies_suspect_at === null) return {mirror: current, changed: false}
    const mirror = await trx.updateTable('mirror').set({scan_refused_at: null, bad_copies_suspect_at: null}).where('id', '=', current.id).returningAll().executeTakeFirstOrThrow()
    return {mirror, changed: true}
  })
}

/** Filters for {@link listMirrors}; all optional. */
export interface MirrorFilter {
  /** ISO country code (any case). */
  country?: string
  /** Continent code (any case). */
  continent?: string
  enabled?: boolean
}

/**
 * The registered mirrors, ordered by identifier, optionally filtered.
 * @throws UsageError for a bad country or continent code
 */
export async function listMirrors(db: Db, filter: MirrorFilter = {}): Promise<MirrorRow[]> {
  let query = db.selectFrom('mirror').selectAll()
  if (filter.country !== undefined) query = query.where('country', '=', normalizeCountry(filter.country))
  if (filter.continent !== undefined) query = query.where('continent', '=', normalizeContinent(filter.continent))
  if (filter.enabled !== undefined) query = query.where('enabled', '=', filter.enabled)
  return query.orderBy('identifier').execute()
}

/**
 * How many of the mirror's copies a content check found corrupt (`mirror_file_bad`, at the
 * files' current versions): each is out of the file's mirror set until a scan sees it
 * change or `mb probe --content` finds it good again.
 */
export async function badCopyCount(db: Kysely<DB>, mirrorId: number): Promise<number> {
  const row = await sql<{n: number}>`
    SELECT count(*)::int AS n FROM mirror_file_bad b JOIN file f ON f.id = b.file_id AND f.size = b.size AND f.mtime = b.mtime
    WHERE b.mirror_id = ${mirrorId}::smallint`.execute(db)
  return Number(row.rows[0]?.n ?? 0)
}
