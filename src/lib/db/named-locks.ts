/**
 * Every named lock mb takes, in one place, with one key scheme.
 *
 * On PostgreSQL a lock is a session-level advisory lock on the two-int4 key
 * (`classId`, `objectId`): `classId` names the kind of lock (four ASCII bytes starting with
 * "mb", so they are recognisable in `pg_locks.classid`), `objectId` the thing locked (a
 * mirror id, or 0 for a lock on a whole activity). On the embedded store they are lock files
 * named `name` in `DATA_DIR/locks` (`embedded-locks.ts`), shared by the store's owner and the
 * clients of its socket, which all use one PGlite session and so cannot use advisory locks.
 */

/** A lock as the stores take it. Build one with the constants and functions below. */
export interface Lock {
  /** Unique name: the embedded store's lock file, and for logs (`scan:12`, `probe`). */
  readonly name: string
  /** PostgreSQL advisory-lock key, first int4: the kind of lock. */
  readonly classId: number
  /** PostgreSQL advisory-lock key, second int4: what is locked. */
  readonly objectId: number
}

/** 'mbsc': one scan of one mirror at a time. */
const SCAN_CLASS = 0x6d627363
/** 'mbpr': one background probe round at a time among the replicas sharing a database. */
const PROBE_CLASS = 0x6d627072

/** 'mbpu': one push to one mirror at a time. */
const PUSH_CLASS = 0x6d627075

/** Held by `mb push` (or `mb serve --push-after`) for the whole push to mirror `mirrorId`; a second push is refused. */
export function pushLock(mirrorId: number): Lock {
  return {name: `push:${mirrorId}`, classId: PUSH_CLASS, objectId: mirrorId}
}

/**
 * Held by `mb serve --push-after` for one round (index, then push to every push mirror); the
 * other workers or replicas that saw the same changes skip theirs. Mirror ids start at 1, so
 * object id 0 is free for it.
 */
export const PUSH_ROUND_LOCK: Lock = {name: 'push-round', classId: PUSH_CLASS, objectId: 0}

/** Held by a scan while it reconciles mirror `mirrorId` (smallint); a second scan is refused. */
export function scanLock(mirrorId: number): Lock {
  return {name: `scan:${mirrorId}`, classId: SCAN_CLASS, objectId: mirrorId}
}

/** Held by `mb serve --probe-interval` while it probes; other replicas skip their round. */
export const PROBE_LOCK: Lock = {name: 'probe', classId: PROBE_CLASS, objectId: 0}

/** Held by `mb serve` (`probe.content_interval_seconds`) for one round of background content checks; other replicas skip theirs. */
export const CONTENT_CHECK_LOCK: Lock = {name: 'content-check', classId: PROBE_CLASS, objectId: 1}
