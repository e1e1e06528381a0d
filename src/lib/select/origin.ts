/**
 * Step 1 of `select()`: files the origin always delivers itself, whatever the mirrors:
 * files under `min_size`, `origin_only` patterns, excluded User-Agents, client CIDRs and
 * MIME types, checked in that order.
 */
import mime from 'mime-types'
import {cidrContains, type IpAddress} from '../net.js'
import type {SelectOptions} from './options.js'
import type {ClientInfo, OriginReason, SelectFile} from './types.js'

/** Why the origin delivers a file, with a human detail. */
interface OriginException {
  reason: OriginReason
  detail: string
}

/** The first origin exception that applies to this client and file, or undefined. */
export function originException(client: ClientInfo, address: IpAddress | undefined, file: SelectFile, options: SelectOptions): OriginException | undefined {
  if (file.size < options.minSize) return {reason: 'small_file', detail: `${file.size} bytes, below min_size ${options.minSize}`}
  const pattern = options.originOnlyMatch(file.path)
  if (pattern !== undefined) return {reason: 'origin_only', detail: `matches origin_only pattern ${pattern}`}
  if (client.userAgent && options.excludeUserAgents.length > 0) {
    for (const re of options.excludeUserAgents) if (re.test(client.userAgent)) return {reason: 'excluded_agent', detail: `User-Agent matches ${re.source}`}
  }
  if (address && options.excludeClients.length > 0) {
    for (const cidr of options.excludeClients) if (cidrContains(cidr, address)) return {reason: 'excluded_client', detail: `client ${client.ip} is in excluded ${cidr[0].toString()}/${cidr[1]}`}
  }
  if (options.excludeMime.length > 0) {
    const type = mime.lookup(file.path)
    const glob = type ? options.excludeMimeMatch(type) : undefined
    if (glob !== undefined) return {reason: 'excluded_mime', detail: `MIME type ${type} matches ${glob}`}
  }
  return undefined
}
