/**
 * What `mb serve`'s HTTP front is built with ({@link ServerOptions}) and what a reload may
 * change in it ({@link ServerSettings}), with the connection limits' defaults.
 */
import type {Logger} from 'pino'
import type {GeoResolver} from '../../geo/geoip.js'
import type {FileVersion} from '../../origin/freshness.js'
import type {SelectOptions} from '../../select/options.js'
import type {ClientInfo, SelectMirror} from '../../select/types.js'
import type {VerifyOptions} from '../../verify/verifier.js'
import type {SnapshotKeeper} from '../snapshot/keeper.js'
import type {CountryQueryTrust, TrustedProxies} from './client-address.js'
import {type ConnectionLimits, defaultMaxConnections, openFileLimit} from './connections.js'
import type {OriginBudgetSettings} from './origin-budget.js'

export interface ServerOptions {
  /** The origin tree (absolute or relative; resolved with realpath at start). */
  root: string
  keeper: Pick<SnapshotKeeper, 'current'>
  geo: GeoResolver
  selectOptions: SelectOptions
  trustedProxies: TrustedProxies | readonly string[]
  logger?: Logger
  /** Candidates a redirect ranks, at least 1: Location and the Link alternatives are taken from them (default: selectOptions.maxAlternatives). */
  linkCount?: number
  /** Who may use `?country=XX` (a testing aid); undefined = nobody, the parameter is ignored. */
  countryQuery?: CountryQueryTrust
  /** Connection caps and time limits (default: {@link DEFAULT_CONNECTION_SETTINGS}). */
  connections?: ConnectionSettings
  /** `index.exclude`: globs on root-relative paths never delivered from disk nor listed, as if absent (default none). */
  indexExclude?: readonly string[]
  /** Sent as `Server: mb/VERSION` on every answer (RFC 9110 §10.2.4); none when absent. */
  version?: string
  /** Verified redirects (src/lib/verify); undefined = off. */
  verify?: VerifyOptions
  /** How long one stat of an indexed file vouches that the disk still holds the indexed version, seconds (default 1; 0 = no check: the index is trusted). */
  diskCheckSeconds?: number
  /** Whether the disk check watches the origin's directories (src/lib/origin/watch.ts) instead of a stat per path and period (default true). */
  diskCheckWatch?: boolean
  /** Called once when a request finds an indexed file changed on disk (after the log line; see `MirrorServer.currentFile` in ./server.ts). */
  onIndexStale?: (stale: IndexStale) => void
  /**
   * Called when an indexed file has no eligible mirror (answered by the origin, reason
   * `no_mirror`), with the mirrors a matching `mirrors` rule names (undefined: none matched)
   * and the client's network (its sticky network key, `select.client_prefix_v4`/`_v6`, as
   * text): the scans on demand hear of it (src/lib/scan/demand.ts). Never on a redirect.
   */
  onNoMirror?: (path: string, ruleMirrors: readonly string[] | undefined, network: string) => void
  /**
   * Called on a redirect outside the client's own tier (the first mirror's realm is the
   * continent, the world or the fallbacks: no mirror of the client's country or AS held the
   * file), with the request's mirrors and the client's network, when no redirect rule
   * matched: the scans on demand look at that tier's mirrors, which may have synced the file
   * since their last scan (../../redirector/tier-scans.ts). Must be cheap: it runs on the
   * redirect path.
   */
  onOutsideTier?: (path: string, client: ClientInfo, mirrors: ReadonlyMap<number, SelectMirror>, network: string) => void
  /**
   * Called when a client retries away from a mirror: a download of `path` starts again from
   * the address that was last sent to mirror `mirrorId` for it, within the retry window
   * (src/lib/select/retry.ts). At most once per client address, path and window. The content
   * checks hear of it and check that copy (the signal of a bad copy a client met).
   */
  onRetryAway?: (path: string, mirrorId: number) => void
  /** `serve.origin_budget` (./origin-budget.ts; default: 100 MiB/s in all, 10 MiB/s per client network). */
  originBudget?: OriginBudgetSettings
}

/** An indexed file whose size or mtime on disk differs from the index. */
export interface IndexStale {
  /** Origin-relative path. */
  path: string
  /** What the index says (bytes, Unix seconds). */
  indexed: FileVersion
  /** What the disk says now (bytes, Unix seconds). */
  disk: FileVersion
}

/** Connection caps (./connections.ts) and node:http's time limits, in seconds. */
export interface ConnectionSettings extends ConnectionLimits {
  /** Time a client has to send a complete request header, from connecting or from the end of the previous answer (s). */
  headerTimeoutSeconds: number
  /** Time an idle keep-alive connection is kept open (s). */
  keepAliveTimeoutSeconds: number
}

/** The defaults of {@link ConnectionSettings} (the `serve:` keys' defaults). */
export const DEFAULT_CONNECTION_SETTINGS: ConnectionSettings = {
  maxConnections: defaultMaxConnections(openFileLimit()),
  maxConnectionsPerClient: 64,
  headerTimeoutSeconds: 10,
  keepAliveTimeoutSeconds: 5,
}

/** Shortest time limit on a whole request (node:http's `requestTimeout`), in ms. */
export const REQUEST_TIMEOUT_MS = 30_000

/**
 * What a reload (SIGHUP) may change in a running server: each field replaces the current one
 * for the requests that start afterwards.
 */
export interface ServerSettings {
  selectOptions: SelectOptions
  trustedProxies: TrustedProxies
  geo: GeoResolver
  linkCount: number
  countryQuery: CountryQueryTrust | undefined
  connections: ConnectionSettings
  verify: VerifyOptions | undefined
  originBudget: OriginBudgetSettings
}
