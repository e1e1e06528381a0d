/**
 * `background_round`: when the last round of each kind of background work that `mb serve` runs
 * on a timer finished (`name` is the round's lock name: `content-check`). A server that starts
 * runs its first round when the last one, of any replica or an earlier process, is an interval
 * old or older, so that neither restarts nor new replicas add rounds, and a new store checks at
 * once.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`CREATE TABLE background_round (name text PRIMARY KEY, finished_at timestamptz NOT NULL)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE background_round`.execute(db)
}
