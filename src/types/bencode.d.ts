/** Types of the `bencode` package (webtorrent's encoder, 4.x), which ships none. */
declare module 'bencode' {
  type Bencodable = number | string | Uint8Array | Bencodable[] | {[key: string]: Bencodable | undefined}
  const bencode: {
    /** Bencodes `value` (BEP 3): dictionary keys sorted, strings as UTF-8; undefined members are left out. */
    encode(value: Bencodable): Uint8Array
    // biome-ignore lint/suspicious/noExplicitAny: bencoded data has no static shape
    decode(data: Uint8Array, encoding?: string): any
    byteLength(value: Bencodable): number
  }
  export default bencode
}
