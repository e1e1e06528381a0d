/**
 * Which {@link Lister} serves which protocol, and the order protocols are tried in.
 */
import {ftpLister} from './ftp.js'
import {httpLister} from './http.js'
import {rsyncLister} from './rsync.js'
import type {Lister} from './types.js'

export type Protocol = Lister['protocol']

/** Scan order: the first protocol the mirror has a URL for is tried first. */
export const PROTOCOL_ORDER: Protocol[] = ['rsync', 'ftp', 'http']

/** The built-in lister of each protocol. */
export const LISTERS: Readonly<Record<Protocol, Lister>> = {rsync: rsyncLister, ftp: ftpLister, http: httpLister}
