/**
 * The outdated copies that the mirrors' last scans saw of a file (`mirror_file_stale`, which
 * the snapshot does not hold), for the mirror list, kept between snapshot refreshes: a scan's
 * findings reach `mb serve` through a refresh anyway (the file row of a copy that goes stale
 * or is fixed changes with it), so a popular file's mirror list costs one query per refresh
 * (2 s by default) instead of one per request.
 */
import type {Database} from '../db/index.js'
import {staleCopiesOf} from '../lookup/files.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'

/** Outdated copies by mirror id: the size (bytes) and mtime (Unix seconds, UTC, null when unknown) the mirror holds. */
export type StaleCopies = ReadonlyMap<number, {size: number; mtime: number | null}>

interface Kept {
  size: number
  mtime: number
  copies: StaleCopies
}

/** Paths whose copies are kept at most between two refreshes (the map is emptied when full). */
const MAX_PATHS = 10_000

/** {@link staleCopiesOf}, kept per file version until the snapshot is refreshed (see the module doc). */
export class StaleCopiesCache {
  private kept = new Map<string, Kept>()
  /** The snapshot and refresh the kept copies were read under. */
  private snapshot: Snapshot | undefined
  private refreshedAt = 0

  constructor(private readonly database: Database) {}

  /**
   * The outdated copies of this version (`size` bytes, `mtime` Unix seconds) of `file.path`,
   * as of `snapshot`'s last refresh.
   * @throws whatever the database driver throws (unreachable); nothing is kept then
   */
  async of(snapshot: Snapshot, file: {path: string; size: number; mtime: number}): Promise<StaleCopies> {
    if (snapshot !== this.snapshot || snapshot.refreshedAt !== this.refreshedAt || this.kept.size >= MAX_PATHS) {
      this.kept = new Map()
      this.snapshot = snapshot
      this.refreshedAt = snapshot.refreshedAt
    }
    const hit = this.kept.get(file.path)
    if (hit !== undefined && hit.size === file.size && hit.mtime === file.mtime) return hit.copies
    const kept = this.kept
    const copies = await staleCopiesOf(this.database, file)
    // Read under an older refresh when one happened meanwhile: not kept.
    if (kept === this.kept) kept.set(file.path, {size: file.size, mtime: file.mtime, copies})
    return copies
  }
}
