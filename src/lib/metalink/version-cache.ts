/**
 * The one cache of what a document says about one file version and nothing about the
 * client: the hash row and the rendered Metalink 4 / 3 file parts (routes.ts), the BitTorrent
 * info dictionary and the zsync block sums (formats.ts), the redirect headers. Entries are
 * keyed by path and hold a copy of everything of the version that changes a document (size,
 * mtime, md5, sha1, sha256, and the formats bits of the snapshot entry: which piece hashes,
 * torrent data and zsync sums the store holds): a lookup that differs in any of them misses
 * and drops the entry, so a file rewritten, re-hashed or re-indexed with another piece
 * algorithm (`mb index --piece-hash`) is never described as it was. Nothing is keyed by object identity (the
 * snapshot may hand out a new entry object for the same version). A snapshot entry names its
 * digests by `digestId`: while the id is the one the entry was made with, the hashes are not
 * read (a hit then decodes no hex); another id, or none, compares the hashes themselves.
 */

/** The version of a file an entry is valid for (size bytes, mtime Unix seconds, hex digests or null). */
export interface CachedVersion {
  path: string
  size: number
  mtime: number
  md5?: string | null
  sha1?: string | null
  sha256?: string | null
  /** The snapshot entry's formats bits (FileEntry.formats, src/lib/serve/snapshot/snapshot.ts); absent = 0. */
  formats?: number
  /** See FileEntry.digestId (src/lib/serve/snapshot/snapshot.ts): equal ids, equal digests. */
  digestId?: number
}

interface Entry<T> {
  size: number
  mtime: number
  md5: string | null
  sha1: string | null
  sha256: string | null
  formats: number
  /** The digestId last seen with these hashes (undefined: none known). */
  digestId: number | undefined
  value: T
  bytes: number
  /** The cache's move count when this entry was last put at the young end. */
  moved: number
}

/** `hit` was made for the same hashes as `file`'s: by digest id when it is the same, else by the hashes. */
function sameHashes(hit: Entry<unknown>, file: CachedVersion): boolean {
  const id = file.digestId
  if (id !== undefined && id === hit.digestId) return true
  if (hit.sha256 !== (file.sha256 ?? null) || hit.sha1 !== (file.sha1 ?? null) || hit.md5 !== (file.md5 ?? null)) return false
  hit.digestId = id
  return true
}

/** What one {@link VersionCache} may hold: entries and the sum of their `bytes` (either may be Infinity). */
export interface CacheBudget {
  entries: number
  bytes: number
}

/**
 * An LRU keyed by path, each entry valid for one file version, bounded by entries and by
 * bytes. A hit moves its entry to the young end only when half the cache has moved since it
 * was last put there: an entry in the young half cannot be next to go, and a hot path then
 * costs one lookup instead of a delete and an insert per hit.
 */
export class VersionCache<T> {
  private readonly map = new Map<string, Entry<T>>()
  private bytes = 0
  /** Entries put at the young end so far (inserted or moved). */
  private moves = 0

  private readonly maxEntries: number
  private readonly maxBytes: number

  /** @param budget entries kept at most, and the sum of their `bytes` (an entry larger than that is not kept) */
  constructor(budget: CacheBudget) {
    this.maxEntries = budget.entries
    this.maxBytes = budget.bytes
  }

  /** The value kept for exactly this version of `file.path`, or undefined (an entry for another version is dropped). */
  get(file: CachedVersion): T | undefined {
    const hit = this.map.get(file.path)
    if (!hit) return undefined
    if (hit.size !== file.size || hit.mtime !== file.mtime || hit.formats !== (file.formats ?? 0) || !sameHashes(hit, file)) {
      this.map.delete(file.path)
      this.bytes -= hit.bytes
      return undefined
    }
    if (this.moves - hit.moved >= this.map.size / 2) {
      this.map.delete(file.path)
      this.map.set(file.path, hit) // most recently used last
      hit.moved = ++this.moves
    }
    return hit.value
  }

  /** Keeps `value` for this version of `file.path` (`bytes`: its size, for the byte bound), evicting the least recently used. */
  set(file: CachedVersion, value: T, bytes: number): void {
    if (bytes > this.maxBytes) return
    const old = this.map.get(file.path)
    if (old) {
      this.map.delete(file.path)
      this.bytes -= old.bytes
    }
    while (this.map.size > 0 && (this.map.size >= this.maxEntries || this.bytes + bytes > this.maxBytes)) {
      const [key, oldest] = this.map.entries().next().value as [string, Entry<T>]
      this.map.delete(key)
      this.bytes -= oldest.bytes
    }
    this.map.set(file.path, {
      size: file.size,
      mtime: file.mtime,
      md5: file.md5 ?? null,
      sha1: file.sha1 ?? null,
      sha256: file.sha256 ?? null,
      formats: file.formats ?? 0,
      digestId: file.digestId,
      value,
      bytes,
      moved: ++this.moves,
    })
    this.bytes += bytes
  }
}
