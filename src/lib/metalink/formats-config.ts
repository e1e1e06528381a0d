/**
 * Settings of the `torrent:` and `zsync:` sections of the config file (the BitTorrent and
 * zsync representations of an origin file). Keys are snake_case.
 *
 * ```yaml
 * torrent:
 *   trackers: []          # announce URLs; empty = web seeds only (no announce, no DHT hint)
 *   meta4_metaurl: false  # name the .torrent in each meta4 (<metaurl mediatype="torrent">), after every URL
 * zsync:
 *   enabled: true         # compute zsync block sums at `mb index --hashes` time, serve PATH.zsync
 *   min_size: 67108864    # only for files of at least this many bytes (64 MiB)
 * ```
 */
import {z} from 'zod'
import {listOf} from '../config-fields.js'

/** Default `zsync.min_size`: 64 MiB, the size of a small ISO image. */
const DEFAULT_ZSYNC_MIN_SIZE = 64 * 1024 * 1024

/**
 * A tracker announce URL: http(s) (BEP 3) or udp (BEP 15) with a host. Anything else
 * (`javascript:`, `file:`, `data:`) would be written into every .torrent and magnet link.
 */
const trackerUrl = z.string().refine(
  (value) => {
    try {
      const url = new URL(value)
      return ['http:', 'https:', 'udp:'].includes(url.protocol) && url.hostname !== ''
    } catch {
      return false
    }
  },
  {message: 'expected an http://, https:// or udp:// tracker announce URL, e.g. udp://tracker.example.org:6969/announce'},
)

export const TorrentConfigSchema = z
  .object({
    trackers: listOf(trackerUrl).default([]).describe('Tracker announce URLs written into every .torrent (`announce`, `announce-list`) and magnet link (`tr=`); empty = web seeds only.'),
    meta4_metaurl: z
      .boolean()
      .default(false)
      .describe(
        'Name the .torrent in Metalink 4 documents (`<metaurl mediatype="torrent">`, RFC 5854 §4.2.8), with a priority after every URL. Off by default: aria2c given such a meta4 downloads through BitTorrent and then seeds until stopped (unless run with --seed-time=0), so `aria2c URL` would never end by itself.',
      ),
  })
  .strict()

export const ZsyncConfigSchema = z
  .object({
    enabled: z.boolean().default(true).describe('Compute zsync block sums at `mb index --hashes` time and serve PATH.zsync; false turns both off.'),
    min_size: z.coerce
      .number()
      .int()
      .min(1)
      .max(2 ** 40)
      .default(DEFAULT_ZSYNC_MIN_SIZE)
      .describe('Files of at least this many bytes get zsync block sums (about 8 bytes per 4 KiB block); smaller ones answer PATH.zsync with 404.'),
  })
  .strict()

export type ZsyncConfig = z.infer<typeof ZsyncConfigSchema>
/** The `torrent:` section, as validated. */
export type TorrentConfig = z.infer<typeof TorrentConfigSchema>

/** The smallest file size in bytes that gets zsync sums, or null when zsync is turned off. */
export function zsyncMinSize(config: ZsyncConfig): number | null {
  return config.enabled ? config.min_size : null
}
