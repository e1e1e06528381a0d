/**
 * Settings of the `yum:` section of the config file: the repositories dnf and yum reach
 * through MirrorManager-style URLs (`/metalink?repo=R&arch=A`, `/mirrorlist?repo=R&arch=A`).
 *
 * ```yaml
 * yum:
 *   repos:
 *     - repo: fedora-42                       # dnf's repo= value
 *       arch: [x86_64, aarch64]               # one arch or a list
 *       path: fedora/releases/42/Everything/$arch/os   # the repository directory ($arch, $repo substituted)
 *   alternates_days: 3                        # older repomd.xml versions listed this long after they were replaced
 * ```
 */
import {trimSlashes} from '../text.js'
import {z} from 'zod'
import {listOf} from '../config-fields.js'

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's job
const CONTROL = /[\u0000-\u001f\u007f]/

/**
 * Why `path` (after `$arch`/`$repo` are replaced) is not a directory inside the origin tree:
 * an absolute path, a `..` segment, a backslash or a control character; undefined when it is one.
 */
function repoPathProblem(path: string): string | undefined {
  if (path.startsWith('/')) return 'an absolute path; give the directory relative to the origin root, e.g. fedora/releases/42/Everything/$arch/os'
  if (path.split('/').includes('..')) return 'a ".." segment would leave the origin tree'
  if (path.includes('\\') || CONTROL.test(path)) return 'backslashes and control characters are not allowed'
  return undefined
}

const RepoSchema = z
  .object({
    repo: z.string().min(1).describe('The `repo=` value dnf sends (e.g. `fedora-42`).'),
    arch: listOf(z.string().min(1)).describe('The `arch=` values this entry answers (one, or a list).'),
    path: z.string().min(1).describe('The repository directory, relative to the origin root, holding `repodata/repomd.xml`; `$arch` and `$repo` are replaced.'),
  })
  .strict()
  .superRefine((entry, ctx) => {
    // Checked after substitution too: an arch or repo value may bring its own "/..".
    const paths = [entry.path, ...entry.arch.map((arch) => entry.path.replaceAll('$arch', arch).replaceAll('$repo', entry.repo))]
    for (const path of paths) {
      const problem = repoPathProblem(path)
      if (problem) {
        ctx.addIssue({code: z.ZodIssueCode.custom, path: ['path'], message: `${JSON.stringify(path)} is not a directory inside the origin tree: ${problem}`})
        return
      }
    }
  })

export const YumConfigSchema = z
  .object({
    repos: z.array(RepoSchema).default([]).describe('The (repo, arch) pairs `/metalink` and `/mirrorlist` answer, and their directories.'),
    alternates_days: z.coerce.number().min(0).max(365).default(3).describe('Days a replaced repomd.xml stays in the metalink as an `mm0:alternate` (its mirrors stay listed too).'),
  })
  .strict()

export type YumConfig = z.infer<typeof YumConfigSchema>

/** (repo, arch) → the repository directory (origin-relative, no leading or trailing '/'), in configuration order. */
export function repoTable(config: YumConfig): Map<string, string> {
  const table = new Map<string, string>()
  for (const entry of config.repos) {
    for (const arch of entry.arch) {
      const dir = trimSlashes(entry.path.replaceAll('$arch', arch).replaceAll('$repo', entry.repo))
      const key = repoKey(entry.repo, arch)
      if (!table.has(key)) table.set(key, dir)
    }
  }
  return table
}

/** The key of a (repo, arch) pair in {@link repoTable}. */
export function repoKey(repo: string, arch: string): string {
  return `${repo}\n${arch}`
}
