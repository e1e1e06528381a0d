/**
 * Checks that `mb serve` makes before it opens anything: the paths it will write must be
 * usable, so that a typo is a usage error (exit 2) at start, not a server that runs without
 * its access log or fails once the store is open.
 */
import {accessSync, closeSync, constants, existsSync, openSync, statSync} from 'node:fs'
import {dirname, join, resolve} from 'node:path'
import type {Config} from '../config/index.js'
import {SHARED_SOCKET_NAME} from '../db/pglite.js'
import {UsageError} from '../errors.js'
import {requireRoot, rootNotDirectory} from '../origin/root.js'

/** Longest Unix socket path Linux accepts: `sun_path` is 108 bytes with the trailing NUL (unix(7)). */
const MAX_SOCKET_PATH_BYTES = 107

/**
 * Checks the access log target and, on the embedded store, the path of the socket that
 * `mb serve` shares the store through.
 * - `serve.access_log` (unless `-`): an existing file must open for appending (it is opened
 *   and closed, not changed); a new one needs an existing, writable directory.
 * - the socket `DATA_DIR/.s.PGSQL.5432` must fit a Unix socket path (107 bytes).
 * @throws UsageError `ACCESS_LOG_INVALID` or `SOCKET_PATH_INVALID`, naming the path and the fix
 */
export function checkServePaths(config: Config): void {
  if (config.serve.access_log && config.serve.access_log !== '-') checkAccessLog(resolve(config.serve.access_log))
  if (!config.database_url && config.data_dir) {
    const socket = join(resolve(config.data_dir), SHARED_SOCKET_NAME)
    const bytes = Buffer.byteLength(socket)
    if (bytes > MAX_SOCKET_PATH_BYTES)
      throw new UsageError(
        `The embedded store's socket ${socket} would be ${bytes} bytes long, more than the ${MAX_SOCKET_PATH_BYTES} a Unix socket path may have. Move the store to a shorter directory (--data-dir or MB_DATA_DIR).`,
        'SOCKET_PATH_INVALID',
      )
  }
}

/** @throws UsageError `ACCESS_LOG_INVALID` when `path` cannot be opened for appending */
function checkAccessLog(path: string): void {
  const fix = 'Create the directory (writable by the user mb runs as) or pass another --access-log path.'
  if (existsSync(path)) {
    if (statSync(path).isDirectory()) throw new UsageError(`The access log ${path} is a directory. Pass a file path to --access-log.`, 'ACCESS_LOG_INVALID')
    try {
      closeSync(openSync(path, 'a'))
    } catch (error) {
      throw new UsageError(`The access log ${path} cannot be opened for appending: ${(error as Error).message}. ${fix}`, 'ACCESS_LOG_INVALID')
    }
    return
  }
  const dir = dirname(path)
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UsageError(`The access log ${path} cannot be created: the directory ${dir} does not exist. ${fix}`, 'ACCESS_LOG_INVALID')
  try {
    accessSync(dir, constants.W_OK | constants.X_OK)
  } catch {
    throw new UsageError(`The access log ${path} cannot be created: the directory ${dir} is not writable. ${fix}`, 'ACCESS_LOG_INVALID')
  }
}

/** The origin root, checked. @throws UsageError `ROOT_INVALID` when absent or not a directory */
export function checkRoot(given: string | undefined): string {
  const root = requireRoot(given)
  if (!existsSync(root) || !statSync(root).isDirectory()) throw rootNotDirectory(root, existsSync(root) ? 'not a directory' : 'it does not exist')
  return root
}
