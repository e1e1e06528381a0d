/**
 * Counting rule hits in `mb serve`: an observer adds each request a rule answered to an
 * in-memory count per (UTC day, rule), and a timer writes the counts to `rule_hit_daily`
 * (one upsert per day). No database write per request; a failed write keeps the counts for
 * the next one, as the download statistics do (src/lib/stats/collector.ts).
 */
import type {Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {errorMessage} from '../errors.js'
import {addRuleHits} from './registry.js'

const DAY_MS = 86_400_000

/** Distinct (day, rule) keys kept before new rules stop being counted (a bound, never reached with sane rule counts). */
const MAX_KEYS = 10_000

/** The in-memory counts and their flushing. */
export class RuleHitCounter {
  /** Day start (Unix ms, UTC) → rule name → hits not yet written. */
  private pending = new Map<number, Map<string, number>>()
  private keys = 0
  private timer?: NodeJS.Timeout
  private flushing?: Promise<boolean>

  constructor(private readonly logger?: {error(obj: object, msg?: string): void}) {}

  /** The observer for `mb serve`: counts records that carry a rule name (synchronous, memory only). */
  readonly observer = (record: {time: number; rule?: string}): void => {
    const rule = record.rule
    if (rule === undefined) return
    this.add(Math.floor(record.time / DAY_MS) * DAY_MS, rule, 1)
  }

  private add(day: number, rule: string, hits: number): void {
    let counts = this.pending.get(day)
    if (counts === undefined) {
      counts = new Map()
      this.pending.set(day, counts)
    }
    const n = counts.get(rule)
    if (n === undefined && this.keys >= MAX_KEYS) return
    if (n === undefined) this.keys++
    counts.set(rule, (n ?? 0) + hits)
  }

  /** Writes every pending count (concurrent calls share one write). @returns false when the write failed (counts kept) */
  flush(db: Kysely<DB>): Promise<boolean> {
    this.flushing ??= this.write(db).finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async write(db: Kysely<DB>): Promise<boolean> {
    const taken = this.pending
    if (taken.size === 0) return true
    this.pending = new Map()
    this.keys = 0
    try {
      for (const [day, counts] of taken) {
        await addRuleHits(db, day, counts)
        taken.delete(day)
      }
      return true
    } catch (error) {
      // Put back what was not written, added to what arrived meanwhile.
      for (const [day, counts] of taken) for (const [rule, n] of counts) this.add(day, rule, n)
      this.logger?.error({err: errorMessage(error)}, 'rule hits: write to the database failed; counts kept for the next write')
      return false
    }
  }

  /** Writes every `intervalSeconds` (unref'd timer) until {@link stop}. */
  start(db: Kysely<DB>, intervalSeconds: number): void {
    this.timer = setInterval(() => void this.flush(db), Math.max(50, intervalSeconds * 1000))
    this.timer.unref()
  }

  /** Stops the timer and writes what is pending. */
  async stop(db: Kysely<DB>): Promise<boolean> {
    clearInterval(this.timer)
    await this.flushing
    return this.flush(db)
  }
}
