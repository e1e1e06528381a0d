/**
 * Sorts the commands of `oclif.manifest.json` by id, after `oclif manifest` wrote it (the
 * `build` script), so that one commit always packs the same bytes: oclif lists commands in
 * the order it finds their files, which the file system decides. Plain JavaScript, so that the
 * build needs nothing beyond what it already runs.
 *
 * Usage: `node scripts/sort-manifest.mjs [FILE]` (default: ./oclif.manifest.json).
 */
import {readFileSync, renameSync, writeFileSync} from 'node:fs'

/**
 * The manifest with its `commands` in ascending order of id (code-point order, independent
 * of locale); everything else as it was.
 * @param {{commands?: Record<string, unknown>}} manifest
 */
function sortManifest(manifest) {
  const commands = manifest.commands ?? {}
  const ids = Object.keys(commands).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  return {...manifest, commands: Object.fromEntries(ids.map((id) => [id, commands[id]]))}
}

{
  const file = process.argv[2] ?? 'oclif.manifest.json'
  const sorted = sortManifest(JSON.parse(readFileSync(file, 'utf8')))
  // Written whole, then renamed: a failed build never leaves half a manifest.
  writeFileSync(`${file}.tmp`, JSON.stringify(sorted, null, 2))
  renameSync(`${file}.tmp`, file)
}
