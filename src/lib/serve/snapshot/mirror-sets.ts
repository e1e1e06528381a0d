/**
 * The mirror-id sets of the snapshot's files, interned ({@link MirrorSetPool}).
 */

const CHUNK_ENTRIES = 1 << 20
/** The empty mirror set. */
export const EMPTY = new Int16Array(0)

/**
 * Mirror-id sets, interned: identical sets (the same ids in the same order) are one shared
 * Int16Array view, allocated out of large shared chunks (no per-file ArrayBuffer). The files
 * of a directory are usually on the same mirrors, so a tree of millions of files holds a few
 * hundred thousand sets at most.
 *
 * A file whose set changes gets the interned new set; the files that shared its old set keep
 * theirs (views are never written after they are interned). A set no file uses any more stays
 * in its chunk until the next full load: {@link Snapshot.churn} counts the replaced rows, and
 * the keeper (keeper.ts) reloads in full when they pass its limit.
 */
export class MirrorSetPool {
  private chunk = new Int16Array(CHUNK_ENTRIES)
  private used = 0
  /** Interned sets by {@link setHash}; a bucket is an array when hashes collide. */
  private readonly interned = new Map<number, Int16Array | Int16Array[]>()
  /** Where a set is parsed before it is looked up (grows to the largest set seen). */
  private scratch = new Int16Array(256)
  /** Entries allocated in total, in int16 slots (only distinct sets take slots). */
  allocated = 0
  /** Distinct sets interned. */
  sets = 0

  /**
   * The interned set for `array_to_string(mirrors, ',')` output (`"3,17,42"`, or '' / null
   * for none). Non-digit characters other than ',' are ignored.
   */
  fromText(text: string | null): Int16Array {
    if (!text) return EMPTY
    let n = 1
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 44) n++
    if (n > this.scratch.length) this.scratch = new Int16Array(n * 2)
    const ids = this.scratch
    let k = 0
    let value = 0
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c === 44) {
        ids[k++] = value
        value = 0
      } else if (c >= 48 && c <= 57) {
        value = value * 10 + (c - 48)
      }
    }
    ids[k] = value
    return this.intern(ids, n)
  }

  /** The interned set of a list of ids (in this order). */
  fromArray(ids: ArrayLike<number>): Int16Array {
    if (ids.length === 0) return EMPTY
    if (ids.length > this.scratch.length) this.scratch = new Int16Array(ids.length * 2)
    for (let i = 0; i < ids.length; i++) this.scratch[i] = ids[i]
    return this.intern(this.scratch, ids.length)
  }

  /** The interned copy of `ids[0 .. n)`, made when there is none yet. */
  private intern(ids: Int16Array, n: number): Int16Array {
    const hash = setHash(ids, n)
    const bucket = this.interned.get(hash)
    if (bucket !== undefined) {
      if (!Array.isArray(bucket)) {
        if (sameIds(bucket, ids, n)) return bucket
      } else {
        for (const set of bucket) if (sameIds(set, ids, n)) return set
      }
    }
    const view = this.take(n)
    view.set(ids.subarray(0, n))
    this.sets++
    if (bucket === undefined) this.interned.set(hash, view)
    else if (Array.isArray(bucket)) bucket.push(view)
    else this.interned.set(hash, [bucket, view])
    return view
  }

  private take(n: number): Int16Array {
    if (this.used + n > this.chunk.length) {
      this.chunk = new Int16Array(Math.max(CHUNK_ENTRIES, n))
      this.used = 0
    }
    const view = this.chunk.subarray(this.used, this.used + n)
    this.used += n
    this.allocated += n
    return view
  }
}

/** FNV-1a over `ids[0 .. n)`, kept to 30 bits so that it is a small integer Map key. */
function setHash(ids: Int16Array, n: number): number {
  let h = 0x811c9dc5
  for (let i = 0; i < n; i++) h = Math.imul(h ^ ids[i], 0x01000193)
  return (h ^ n) & 0x3fffffff
}

function sameIds(set: Int16Array, ids: Int16Array, n: number): boolean {
  if (set.length !== n) return false
  for (let i = 0; i < n; i++) if (set[i] !== ids[i]) return false
  return true
}
