/**
 * Every per-version cache of `mb serve` (src/lib/metalink/version-cache.ts) and what it may
 * hold, set here once for the composition root (./run.ts). Each is kept per process (each
 * worker of `--workers` has its own). At the bounds below a server holds at most about
 * 224 MiB of cached documents, headers and block sums.
 */
import type {CacheBudget} from '../metalink/version-cache.js'

const MiB = 1024 * 1024

export const CACHE_BUDGETS = {
  /** Hash rows and rendered Metalink 4 / 3 file parts (metalink/routes.ts): a few KiB a version, up to 120 KB for a 700 MB file. */
  documents: {entries: 10_000, bytes: 128 * MiB},
  /** BitTorrent info dictionaries (metalink/formats.ts): bounded by count, each holds the piece hashes. */
  torrents: {entries: 1_000, bytes: Number.POSITIVE_INFINITY},
  /** zsync block sums (metalink/formats.ts): bounded by size, they grow with the file. */
  zsync: {entries: Number.POSITIVE_INFINITY, bytes: 64 * MiB},
  /** The Link and Digest lines of redirects (metalink/redirect-headers.ts): a few hundred bytes a version. */
  redirectHeaders: {entries: 10_000, bytes: 32 * MiB},
} as const satisfies Record<string, CacheBudget>
