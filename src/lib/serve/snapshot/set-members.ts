/**
 * Which of the snapshot's interned mirror sets hold each mirror ({@link SetMembers}), so that
 * a pass over millions of files asks "does this file's set hold mirror M?" with one array read.
 */
import {resized} from './columns.js'

/** 32-bit words each row starts with (room for 2,048 sets); rows grow by half when a set index passes them. */
const INITIAL_WORDS = 64

/**
 * By mirror id, a bitset over the indexes of the distinct mirror sets (the file map's set
 * references): bit `s` of mirror M's row is set when set `s` holds M. Sets are interned and
 * never change once made, so a row is written only when a set is first referenced, for each
 * id in it: the cost of the whole table is one bit write per id of each distinct set, paid
 * while the snapshot loads (12,000,000 writes, about 0.1 s of a 5 s load, for the 60,000 sets
 * of 1,000,000 files on 500 mirrors, `npm run bench -- mirror-page`), and its size is mirrors
 * x sets / 8 bytes, and up to half again while rows wait to grow (4.7 MB there; a few KB for a
 * small network). A mirror's page (../../operator/mirror-view.ts)
 * then tests each file's set with one read of its row instead of a search of the set.
 */
export class SetMembers {
  /** By mirror id: its row (undefined for an id that no set holds). */
  private readonly rows: Array<Uint32Array | undefined> = []
  /** Words in every row. */
  private words = INITIAL_WORDS
  /** The row of an id that no set holds. */
  private none = new Uint32Array(INITIAL_WORDS)

  /** Records that set index `ref` holds the ids of `set` (each set index once, when the set is first referenced). */
  add(ref: number, set: Int16Array): void {
    const word = ref >>> 5
    if (word >= this.words) this.grow(word + 1)
    const bit = 1 << (ref & 31)
    for (let i = 0; i < set.length; i++) {
      const id = set[i]
      if (id < 0) continue // not a mirror id (ids are a serial from 1)
      let row = this.rows[id]
      if (row === undefined) row = this.newRow(id)
      row[word] |= bit
    }
  }

  /**
   * Mirror `id`'s row: bit `s` (`(row[s >>> 5] >>> s) & 1`) is 1 when set index `s` holds it.
   * Every row is long enough for every set index recorded so far; read it right away (a later
   * {@link add} may replace it with a longer one).
   */
  row(id: number): Uint32Array {
    return this.rows[id] ?? this.none
  }

  /** A row for `id`, the list filled up to it first (an element far past the end would turn the list into a slow dictionary). */
  private newRow(id: number): Uint32Array {
    while (this.rows.length <= id) this.rows.push(undefined)
    const row = new Uint32Array(this.words)
    this.rows[id] = row
    return row
  }

  private grow(words: number): void {
    this.words = Math.max(words, Math.ceil(this.words * 1.5))
    for (let id = 0; id < this.rows.length; id++) {
      const row = this.rows[id]
      if (row !== undefined) this.rows[id] = resized(row, this.words)
    }
    this.none = new Uint32Array(this.words)
  }
}
