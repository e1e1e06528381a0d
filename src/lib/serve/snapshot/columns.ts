/** Typed-array columns that grow: shared by the snapshot's file map and path table. */

/** A typed array of the same kind as `from`, `length` elements long, holding a copy of `from` at its start (the rest zero). */
export function resized<T extends Float64Array | Int32Array | Uint32Array | Uint16Array>(from: T, length: number): T {
  const to = new (from.constructor as new (length: number) => T)(length)
  to.set(from)
  return to
}
