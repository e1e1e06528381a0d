/**
 * Probe history and state transitions.
 *
 * - `mirror_probe`: one row per check (mirror x protocol x address family x time), bounded
 *   per mirror by the prober (it keeps the last `probe.history` rows).
 * - `mirror_transition`: state changes, for the whole mirror (`scope` = 'mirror') and per
 *   protocol/family (`scope` = e.g. 'https/ipv6'), bounded by `probe.transitions`.
 *
 * The current state lives on the mirror row: `up` (the summary selection reads), `ipv6`,
 * `status` (per protocol/family detail with consecutive counts), `status_reason`,
 * `status_changed_at`, `needs_rescan`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE mirror_probe (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      at timestamptz NOT NULL DEFAULT now(),
      protocol text NOT NULL CHECK (protocol IN ('http', 'https')),
      family text NOT NULL CHECK (family IN ('ipv4', 'ipv6')),
      ok boolean NOT NULL,
      http_status smallint,
      latency_ms integer,
      reason text NOT NULL,
      url text,
      detail text
    )`.execute(db)
  await sql`CREATE INDEX mirror_probe_mirror_idx ON mirror_probe (mirror_id, id DESC)`.execute(db)

  await sql`
    CREATE TABLE mirror_transition (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      at timestamptz NOT NULL DEFAULT now(),
      scope text NOT NULL,
      from_state text NOT NULL CHECK (from_state IN ('up', 'down', 'unknown')),
      to_state text NOT NULL CHECK (to_state IN ('up', 'down')),
      reason text NOT NULL
    )`.execute(db)
  await sql`CREATE INDEX mirror_transition_mirror_idx ON mirror_transition (mirror_id, id DESC)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS mirror_transition, mirror_probe`.execute(db)
}
