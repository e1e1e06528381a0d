/**
 * Redirect rules (`mb rule add`, docs/selection.md "Redirect rules"): tried in `priority`
 * order (then by name) before mirror selection. A rule matches a path glob and, optionally,
 * client countries (or all but some), continents, CIDRs and AS numbers; its target is a URL
 * (`target = 'url'`), a set of mirrors by identifier (`'mirrors'`), or local delivery
 * (`'origin'`).
 *
 * `mb serve` holds the rules in its snapshot: every statement on `redirect_rule` sends
 * `NOTIFY mb_change` (the statement trigger of docs/change-tracking.md), and every refresh
 * re-reads the whole table (a handful of rows), so no txid column is needed.
 *
 * `rule_hit_daily` counts the requests each rule answered, per UTC day, by rule name (no
 * foreign key: the counts outlive a removed rule). Replicas add up through
 * `INSERT … ON CONFLICT DO UPDATE`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE redirect_rule (
      id serial PRIMARY KEY,
      name text NOT NULL UNIQUE,
      priority integer NOT NULL,
      enabled boolean NOT NULL DEFAULT true,
      path_glob text NOT NULL CHECK (path_glob <> ''),
      countries text[] NOT NULL DEFAULT '{}',
      not_countries text[] NOT NULL DEFAULT '{}',
      continents text[] NOT NULL DEFAULT '{}',
      clients text[] NOT NULL DEFAULT '{}',
      asns bigint[] NOT NULL DEFAULT '{}',
      target text NOT NULL CHECK (target IN ('url', 'mirrors', 'origin')),
      url text,
      append_path boolean NOT NULL DEFAULT false,
      mirrors text[] NOT NULL DEFAULT '{}',
      status smallint NOT NULL DEFAULT 302 CHECK (status IN (301, 302, 307)),
      comment text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK (cardinality(countries) = 0 OR cardinality(not_countries) = 0),
      CHECK ((target = 'url') = (url IS NOT NULL)),
      CHECK ((target = 'mirrors') = (cardinality(mirrors) > 0))
    )`.execute(db)
  await sql`CREATE TRIGGER redirect_rule_notify AFTER INSERT OR UPDATE OR DELETE ON redirect_rule FOR EACH STATEMENT EXECUTE FUNCTION mb_notify_change()`.execute(db)
  await sql`
    CREATE TABLE rule_hit_daily (
      day date NOT NULL,
      rule text NOT NULL,
      hits bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (day, rule)
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS rule_hit_daily`.execute(db)
  await sql`DROP TABLE IF EXISTS redirect_rule`.execute(db)
}
