/**
 * Settings of the `index:` section of the config file: walking the origin tree (`mb index`,
 * and the index that starts each round of `mb serve --push-after`). Keys are snake_case.
 *
 * ```yaml
 * index:
 *   min_ratio: 0.5   # refuse a walk that keeps fewer than this share of the files indexed before
 *   exclude: ['**\/.!(treeinfo|discinfo)', '**\/.*\/**']   # dotfiles, dot directories, rsync's partials
 * ```
 */
import {z} from 'zod'
import {globList} from '../config-fields.js'

/**
 * What the index leaves out by default: dotfiles and everything in a dot directory (`.git/`,
 * rsync's `--delay-updates` directory `.~tmp~/`, and its partial files `.NAME.XXXXXX` while a
 * sync runs), but Fedora's and RHEL's install-tree metadata `.treeinfo` and `.discinfo`,
 * which installers download.
 */
const DEFAULT_INDEX_EXCLUDE = ['**/.!(treeinfo|discinfo)', '**/.*/**']

export const IndexConfigSchema = z
  .object({
    min_ratio: z
      .number()
      .min(0)
      .max(1)
      .default(0.5)
      .describe(
        'A walk that would keep fewer than this share of the files indexed before (in the tree or `--dir` walked) is refused and changes nothing: an unmounted or wrong root must not empty the index. 0 turns the check off.',
      ),
    exclude: globList
      .default(DEFAULT_INDEX_EXCLUDE)
      .describe(
        "Globs (picomatch, dotfiles matched) on origin paths the index leaves out and `mb serve` never delivers from disk (404) nor lists. The default leaves out dotfiles and dot directories (`.git/`, rsync's `.~tmp~/` and `.NAME.XXXXXX` partials) but `.treeinfo` and `.discinfo`; `[]` indexes everything.",
      ),
  })
  .strict()

/** The `index:` section, as validated. */
export type IndexConfig = z.infer<typeof IndexConfigSchema>
