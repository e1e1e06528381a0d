/**
 * Settings of the `index:` section of the config file: walking the origin tree (`mb index`,
 * and the index that starts each round of `mb serve --push-after`). Keys are snake_case.
 *
 * ```yaml
 * index:
 *   min_ratio: 0.5   # refuse a walk that keeps fewer than this share of the files indexed before
 * ```
 */
import {z} from 'zod'

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
  })
  .strict()

/** The `index:` section, as validated. */
export type IndexConfig = z.infer<typeof IndexConfigSchema>
