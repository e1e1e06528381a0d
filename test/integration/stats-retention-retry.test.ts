/**
 * The retention job of `mb serve` (startDailyPrune): a run that fails (here the monthly table
 * is missing, as in an outage) is retried after `retrySeconds`, not the next day, and the
 * retry applies the policy.
 */
import {expect} from 'chai'
import {sql} from 'kysely'
import {PRUNE_RETRY_SECONDS, type PruneResult, startDailyPrune} from '../../src/lib/stats/prune.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`stats retention retry (${backend})`, function () {
  this.timeout(60_000)
  const store = useTestDatabase()

  it('retries a failed run within minutes (5 by default), and the retry rolls the old rows up', async () => {
    expect(PRUNE_RETRY_SECONDS).to.equal(300)
    await sql`INSERT INTO stats_daily (day, path, mirror_id, country, downloads, bytes) VALUES ('2020-01-15', 'old.iso', 0, 'DE', 4, 400)`.execute(store.database.db)
    await sql`ALTER TABLE stats_monthly RENAME TO stats_monthly_away`.execute(store.database.db)
    const errors: string[] = []
    const results: PruneResult[] = []
    let restored = false
    const stop = startDailyPrune(
      store.database,
      {dailyRetentionDays: 30, monthlyRetentionMonths: 1200},
      {
        firstDelaySeconds: 0.05,
        retrySeconds: 0.3,
        onError: (error) => {
          errors.push(String((error as Error).message))
          if (!restored) {
            restored = true
            void sql`ALTER TABLE stats_monthly_away RENAME TO stats_monthly`.execute(store.database.db)
          }
        },
        onResult: (result) => results.push(result),
      },
    )
    try {
      for (let i = 0; i < 200 && results.length === 0; i++) await new Promise((r) => setTimeout(r, 50))
    } finally {
      stop()
    }
    expect(errors.length).to.be.greaterThan(0)
    expect(errors[0]).to.contain('stats_monthly')
    expect(results).to.have.length(1)
    expect(results[0]).to.include({daily_rows_rolled_up: 1, downloads_rolled_up: 4})
    const monthly = await sql<{month: string; downloads: string}>`SELECT to_char(month, 'YYYY-MM-DD') AS month, downloads::text FROM stats_monthly`.execute(store.database.db)
    expect(monthly.rows).to.deep.equal([{month: '2020-01-01', downloads: '4'}])
  })
})
