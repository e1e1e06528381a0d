/**
 * A read-only PostgreSQL standby (`database_read_url`): opening it, and how far its replay
 * trails the primary. A standby fed by streaming replication answers reads with the data it
 * has replayed; `pg_current_snapshot()` and the `xid8` values it reads are the primary's
 * (hot standby, PostgreSQL 13 and later), so the snapshot's change tracking
 * (docs/change-tracking.md) reads it as it reads the primary. It delivers no NOTIFY.
 */
import {sql} from 'kysely'
import {redact} from '../redact.js'
import {prepareSchema} from './migrate.js'
import {openPostgres} from './postgres.js'
import type {Database} from './store.js'

/**
 * Opens the standby at `url` for reading only (see `openPostgres`'s `readOnly`), and checks
 * that its schema is current (it replays the primary's migrations).
 * @param options.poolSize connections (default 4: a refresh and the helpers of a full load)
 * @param options.keepConnection  `openPostgres`'s: for `mb serve`, which polls it
 * @throws MbError DB_UNREACHABLE when it does not answer within 10 s; SCHEMA_OUTDATED
 */
export async function openReadReplica(url: string, options: {poolSize?: number; keepConnection?: boolean} = {}): Promise<Database> {
  const database = await openPostgres(url, redact(url), options.poolSize ?? 4, {readOnly: true, keepConnection: options.keepConnection})
  try {
    await prepareSchema(database, 'check')
  } catch (error) {
    await database.close()
    throw error
  }
  return database
}

/** How far a standby trails its primary. */
export interface ReplicaLag {
  /** False when the server is not in recovery (a primary: it trails nothing, the lag is 0). */
  standby: boolean
  /** Whether its WAL receiver streams from the primary now. */
  streaming: boolean
  /** Commit time (UTC) of the last transaction it replayed; null before the first since its start. */
  replayedAt: Date | null
  /**
   * Seconds by which its data trails the primary's: 0 when it streams and has replayed all it
   * received; otherwise the age of the last replayed transaction
   * (`now() - pg_last_xact_replay_timestamp()`), which also grows while the primary is idle or
   * gone; null when that is unknown (no transaction replayed since it started).
   */
  lagSeconds: number | null
}

/**
 * The replication lag of the server behind `database`, from `pg_last_xact_replay_timestamp()`,
 * `pg_last_wal_receive_lsn()`/`pg_last_wal_replay_lsn()` and `pg_stat_wal_receiver`
 * (PostgreSQL manual, "System Administration Functions", "Recovery Information Functions").
 * Reads only.
 * @throws the driver's error when the server does not answer
 */
export async function replicaLag(database: Database): Promise<ReplicaLag> {
  const {rows} = await sql<{standby: boolean; streaming: boolean; caught_up: boolean; replayed_at: Date | null; age: number | null}>`
    SELECT pg_is_in_recovery() AS standby,
      EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') AS streaming,
      coalesce(pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn(), false) AS caught_up,
      pg_last_xact_replay_timestamp() AS replayed_at,
      greatest(0, extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()))::float8 AS age`.execute(database.db)
  const row = rows[0]
  const replayedAt = row.replayed_at === null ? null : new Date(row.replayed_at)
  if (!row.standby) return {standby: false, streaming: false, replayedAt, lagSeconds: 0}
  const lagSeconds = row.streaming && row.caught_up ? 0 : row.age
  return {standby: true, streaming: row.streaming, replayedAt, lagSeconds}
}
