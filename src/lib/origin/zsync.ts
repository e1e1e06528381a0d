/**
 * The zsync 0.6 parameters of a file, by the rules of zsyncmake (zsync 0.6.2, `c/make.c`),
 * which MirrorBrain follows too:
 *
 * - block size: 2,048 bytes below 100,000,000 bytes, else 4,096;
 * - `Hash-Lengths: seq_matches,rsum_bytes,checksum_bytes` with `seq_matches` = 2,
 *   `rsum_bytes` = ⌊(7.9 + (log₂ len + log₂ blocksize − 8.6) / 2) / 8⌋ clamped to [2, 4],
 *   `checksum_bytes` = the larger of ⌊(7.9 + (20 + log₂ len + log₂(1 + ⌊len / blocksize⌋)) / 2) / 8⌋
 *   and ⌊(7.9 + 20 + log₂(1 + ⌊len / blocksize⌋)) / 8⌋.
 *
 * Each block (the last one padded with zero bytes) contributes its rolling checksum
 * (`a` = Σ bytes, `b` = Σ (blocksize − i) · byte, both mod 2¹⁶, written big-endian as a, b;
 * the trailing `rsum_bytes` of those 4 bytes) and the leading `checksum_bytes` of its MD4.
 * The block sums themselves are computed on the hashing threads (hash.ts).
 */

/** zsync parameters of one file version. Sizes in bytes. */
export interface ZsyncParams {
  /** The file length the parameters were chosen for. */
  size: number
  blockSize: number
  seqMatches: number
  rsumLen: number
  checksumLen: number
}

/** The zsync block size for a file of `size` bytes (zsyncmake's default). */
function zsyncBlockSize(size: number): number {
  return size < 100_000_000 ? 2048 : 4096
}

/**
 * The zsync parameters for a file of `size` bytes (> 0), as zsyncmake chooses them.
 * @param blockSize default {@link zsyncBlockSize}
 */
export function zsyncParams(size: number, blockSize = zsyncBlockSize(size)): ZsyncParams {
  const seqMatches = 2
  const log2 = (x: number) => Math.log(x) / Math.log(2)
  const rsumLen = Math.min(4, Math.max(2, Math.trunc((7.9 + ((Math.log(size) + Math.log(blockSize)) / Math.log(2) - 8.6) / seqMatches) / 8)))
  const blocks = 1 + Math.floor(size / blockSize)
  const checksumLen = Math.max(Math.trunc((7.9 + (20 + (Math.log(size) + Math.log(blocks)) / Math.log(2)) / seqMatches) / 8), Math.trunc((7.9 + (20 + log2(blocks))) / 8))
  return {size, blockSize, seqMatches, rsumLen, checksumLen}
}
