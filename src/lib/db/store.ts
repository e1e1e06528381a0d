/**
 * What every store offers, whatever the backend: the kysely instance for ordinary queries,
 * plus the capabilities that differ between backends (a consistent read view, a dedicated
 * session, named locks, LISTEN). Callers use these and never ask which backend they have.
 *
 * Backends: `postgres` (a pg pool, `postgres.ts`), `pglite` (the embedded store owned by this
 * process, `pglite.ts`) and `pglite-shared` (a pg client of an embedded store that a process,
 * possibly this one, shares through its socket, `postgres.ts`).
 */
import type {Kysely} from 'kysely'
import type {Lock} from './named-locks.js'
import type {DB} from './schema.js'

/** Which store is open; for display (`mb db status`) and for the code in `db/` only. */
type Backend = 'postgres' | 'pglite' | 'pglite-shared'

/** Row-array queries inside one read-only REPEATABLE READ transaction. */
export interface ReadView {
  /** Runs one query; each row is an array of the selected values, in select-list order. */
  query(text: string, params?: unknown[]): Promise<unknown[][]>
  /**
   * Runs `tasks`, each on a view of this same snapshot, and resolves to their results in
   * order. On PostgreSQL they run at once: the first on this view, each other one on a helper
   * connection that imports this transaction's snapshot (`pg_export_snapshot()` /
   * `SET TRANSACTION SNAPSHOT`), so the server produces rows for one while this process parses
   * another's. Stores with a single connection run them one after another on this view.
   * @throws the first task's error; the helper connections are then discarded
   */
  parallel<T>(tasks: Array<(view: ReadView) => Promise<T>>): Promise<T[]>
}

/** One dedicated connection for a unit of work: temp tables and session locks live on it. */
export interface Session {
  /** Queries on this session's connection. */
  db: Kysely<DB>
  /** Runs `fn` in one transaction on this session: COMMIT when it resolves, ROLLBACK when it throws. */
  transaction<T>(fn: (trx: Kysely<DB>) => Promise<T>): Promise<T>
  /**
   * Runs `fn` while this session holds `lock`. When another session holds it, nothing waits:
   * `onBusy` runs instead and its result (or error) is this call's. The lock is released when
   * `fn` settles; if releasing fails, the connection is discarded, which releases it too.
   */
  withLock<T>(lock: Lock, fn: () => Promise<T>, onBusy: () => T | Promise<T>): Promise<T>
}

/** A LISTEN registration. */
export interface Subscription {
  /**
   * Reconnects a dropped PostgreSQL listener (at most one attempt per 2 s); does nothing when
   * it is connected or the store needs no connection for it. Call it when the database has
   * just answered, so an outage is not met with a connection attempt every 2 s.
   */
  renew(): Promise<void>
  /**
   * True while notifications are delivered: the LISTEN connection is up (PostgreSQL, a client
   * of a shared embedded store) or needs none (the embedded store); false on a standby and
   * while a dropped connection waits for {@link renew}.
   */
  readonly listening: boolean
  /** Stops listening. */
  close(): Promise<void>
}

/** An open database. `close()` must be called before the process exits. */
export interface Database {
  db: Kysely<DB>
  /** Which store this is; for display only: the capabilities below hide the differences. */
  backend: Backend
  /** The URL without password, or the PGlite data directory. */
  location: string
  /**
   * Runs `fn` on a consistent view: one REPEATABLE READ transaction (read-only on a
   * PostgreSQL connection), committed when `fn` resolves, rolled back when it throws.
   * @throws whatever the driver throws (unreachable, schema missing) or `fn` throws
   */
  readSnapshot<T>(fn: (view: ReadView) => Promise<T>): Promise<T>
  /**
   * Runs `fn` on one dedicated connection, released afterwards (discarded when the session
   * broke). On the embedded store the whole store is one connection, so that is the session.
   */
  session<T>(fn: (session: Session) => Promise<T>): Promise<T>
  /** {@link Session.withLock} on a session of its own, for work that runs on `db`. */
  withLock<T>(lock: Lock, fn: () => Promise<T>, onBusy: () => T | Promise<T>): Promise<T>
  /**
   * Calls `onNotify` on every NOTIFY on `channel`. PostgreSQL: on a dedicated client outside
   * the pool; when it cannot connect or drops, {@link Subscription.renew} reconnects, and
   * `onDrop` is called when an established connection drops (notifications may have been
   * missed since). PGlite:
   * its own `listen()`. A client of a shared embedded store: LISTEN on a connection of its own
   * to the socket, which copies every NOTIFY to the clients listening (`session-server.ts`).
   * @throws on the embedded store, when PGlite refuses the LISTEN
   */
  listen(channel: string, onNotify: () => void, onDrop?: () => void): Promise<Subscription>
  /** Closes every connection (and, for the embedded store, the store and its socket). */
  close(): Promise<void>
}

/** {@link ReadView.parallel} for a store with one connection: the tasks in turn, on `view`. */
export async function runInSequence<T>(view: ReadView, tasks: Array<(view: ReadView) => Promise<T>>): Promise<T[]> {
  const results: T[] = []
  for (const task of tasks) results.push(await task(view))
  return results
}
