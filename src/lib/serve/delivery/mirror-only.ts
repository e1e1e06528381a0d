/**
 * Mirror-only files in selection: a file the origin pruned that `serve.mirror_only` keeps
 * indexed while mirrors hold it (src/lib/origin/mirror-only.ts) is redirected to those
 * mirrors. The origin exceptions of `select()` (step 1: files under `select.min_size`,
 * `select.origin_only` patterns, excluded agents, clients and MIME types) send a file to the
 * origin, which no longer has it; for such a file the selection is made again without them,
 * so that a checksum file or a repomd.xml of an archive tree is redirected with the ISOs
 * beside it instead of answered 404. The disk check (./index-check.ts) is asked only when an
 * origin exception left no mirror, so redirects pay nothing for it.
 */
import {selectUnderRule} from '../../rules/apply.js'
import type {RuleMatch} from '../../rules/rule.js'
import type {SelectOptions} from '../../select/options.js'
import type {ClientInfo, OriginReason, Selection, SelectMirror} from '../../select/types.js'
import {type FileEntry, fileWith} from '../snapshot/file-entry.js'
import type {RequestContext, RouteServices} from './route.js'

/** The reasons of `select()`'s origin exceptions: the origin delivers such a file itself, while it holds it. */
const ORIGIN_EXCEPTIONS: ReadonlySet<OriginReason | undefined> = new Set<OriginReason>(['small_file', 'origin_only', 'excluded_agent', 'excluded_client', 'excluded_mime'])

/**
 * The selection of `file` under `rule` (../../rules/apply.ts), without the origin exceptions
 * when the origin's tree does not hold the file (`disk.fileOnDisk`).
 */
export function selectHeld(
  rule: RuleMatch | undefined,
  client: ClientInfo,
  file: FileEntry,
  mirrors: ReadonlyMap<number, SelectMirror>,
  options: SelectOptions,
  explain: boolean,
  limit: number,
  disk: Pick<RouteServices, 'fileOnDisk'>,
  ctx: RequestContext,
): Selection {
  const selection = selectUnderRule(rule, client, file, mirrors, options, explain, limit)
  if (selection.ranked.length > 0 || !ORIGIN_EXCEPTIONS.has(selection.origin?.reason) || disk.fileOnDisk(ctx, file.path)) return selection
  return selectUnderRule(rule, client, fileWith(file, {originLacks: true}), mirrors, options, explain, limit)
}
