/**
 * The origin root as every command that reads the tree refuses it (`mb index`, `mb serve`,
 * `mb push`): one wording for a root that is not set and one for a root that is not a
 * directory, each naming the three places a root comes from.
 */
import {UsageError} from '../errors.js'

/** Where a root is set, as the messages name it. */
const WHERE = 'pass --root DIR, set MB_ROOT, or set `root:` in the config file'

/**
 * The configured root (`--root`, `MB_ROOT`, `root:`), checked to be set (not that it exists).
 * @param root the setting's value
 * @param use what the command does with the tree, appended to the message, e.g. "`mb push` sends that tree"
 * @returns the root, unchanged
 * @throws UsageError ROOT_INVALID (exit 2) when it is not set
 */
export function requireRoot(root: string | undefined, use?: string): string {
  if (!root) throw new UsageError(`No origin root given: ${WHERE}${use ? `; ${use}` : ''}.`, 'ROOT_INVALID')
  return root
}

/**
 * The error for a root that is not a readable directory.
 * @param root the root as given
 * @param reason why, e.g. "not a directory" or the file system's message
 * @returns a UsageError ROOT_INVALID (exit 2), to throw
 */
export function rootNotDirectory(root: string, reason: string): UsageError {
  return new UsageError(`The origin root ${root} is not a readable directory (${reason}): ${WHERE}.`, 'ROOT_INVALID')
}
