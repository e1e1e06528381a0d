/**
 * The lister registry: which {@link Lister} serves which protocol. The rsync lister is built in;
 * the FTP and HTTP listers live in `./ftp.ts` and `./http.ts` and are found either because they
 * call {@link registerLister} or, lazily, by importing those modules and taking their exported
 * Lister (any export with `protocol` and `list`).
 */
import {rsyncLister} from './rsync.js'
import type {Lister} from './types.js'

export type Protocol = Lister['protocol']

/** Scan order: the first protocol the mirror has a URL for is tried first. */
export const PROTOCOL_ORDER: Protocol[] = ['rsync', 'ftp', 'http']

const registry = new Map<Protocol, Lister>([['rsync', rsyncLister]])

/** Registers (or replaces) the lister for its protocol. */
export function registerLister(lister: Lister): void {
  registry.set(lister.protocol, lister)
}

function findExportedLister(module: Record<string, unknown>, protocol: Protocol): Lister | undefined {
  for (const value of Object.values(module)) {
    if (value && typeof value === 'object' && (value as Lister).protocol === protocol && typeof (value as Lister).list === 'function') return value as Lister
  }
  const fallback = module.default
  if (fallback && typeof fallback === 'object' && (fallback as Lister).protocol === protocol) return fallback as Lister
  return undefined
}

/**
 * The lister for `protocol`, or undefined when this build has none.
 * Loads `./ftp.js` / `./http.js` on first use when nothing registered itself.
 */
export async function getLister(protocol: Protocol): Promise<Lister | undefined> {
  const known = registry.get(protocol)
  if (known) return known
  if (protocol === 'rsync') return undefined
  try {
    const module = (await import(new URL(`./${protocol}.js`, import.meta.url).href)) as Record<string, unknown>
    const lister = registry.get(protocol) ?? findExportedLister(module, protocol)
    if (lister) registry.set(protocol, lister)
    return lister
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') return undefined
    throw error
  }
}
