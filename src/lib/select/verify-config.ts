/**
 * The `select.verify_*` settings: which redirects are checked with a HEAD on the chosen
 * mirror first (docs/selection.md "Verified redirects"), how long the chain may take, what
 * counts as a failed check, and how long a verdict is kept. Verification is off unless
 * `verify_paths` or `verify_recent_seconds` is set.
 * They are fields of the `select:` section, so they live beside its schema; the checks
 * themselves are src/lib/verify/verifier.ts.
 */
import {z} from 'zod'
import {splitList} from '../text.js'
import {listOf} from '../config-fields.js'

/** A status (`404`) or a status class (`5xx`). */
const statusPattern = z
  .union([z.string(), z.number()])
  .transform((v) => String(v).trim().toLowerCase())
  .refine((v) => /^[1-5](\d\d|xx)$/.test(v), {message: 'expected an HTTP status such as 404 or a class such as 5xx'})

/** The `select.verify_*` fields, spread into the `select:` section's schema. */
export const VERIFY_CONFIG = {
  verify_paths: listOf(z.string().min(1))
    .default([])
    .describe(
      'Glob patterns (picomatch) of paths whose mirror is checked with a HEAD before redirecting (e.g. files that change under the same name); matched on the basename and on the full path. Empty with verify_recent_seconds 0: no checks.',
    ),
  verify_recent_seconds: z.number().int().min(0).max(2_592_000).default(0).describe('Also check the mirror for files the origin changed (mtime) within this many seconds; 0 = off.'),
  verify_budget_ms: z.number().int().min(10).max(10_000).default(300).describe('Time the whole chain of checks of one request may take (ms); when it is spent the origin delivers.'),
  verify_timeout_ms: z.number().int().min(10).max(10_000).default(150).describe("Time one mirror's HEAD may take within the budget (ms); a slower mirror counts as failed (timeout)."),
  verify_fail_statuses: z
    .union([z.string().transform(splitList), z.array(z.union([z.string(), z.number()]))])
    .pipe(z.array(statusPattern))
    .default(['403', '404', '5xx'])
    .describe('Statuses of the HEAD that send the client on to the next mirror: codes (404) or classes (5xx). Connection errors and timeouts always do.'),
  verify_cache_seconds: z
    .number()
    .min(0)
    .max(86_400)
    .default(10)
    .describe('How long a verdict per (mirror, path) is kept: a popular file costs one check per mirror per this many seconds; 0 = no cache.'),
  verify_connections: z.number().int().min(1).max(1024).default(16).describe('Keep-alive connections per mirror host in the pool of checks.'),
}
