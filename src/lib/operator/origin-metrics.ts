/**
 * The origin's meter in Prometheus: what `mb serve` delivered itself, by reason
 * (docs/operations.md, "The origin's share").
 */
import {Counter, type Registry} from 'prom-client'
import {ORIGIN_METER_REASONS, originMeterReason} from '../stats/origin.js'

/**
 * `mb_origin_bytes_total{reason}` and `mb_origin_requests_total{reason}`: what the origin
 * delivered itself, by the meter's fixed reasons (src/lib/stats/origin.ts),
 * each reason present from the start at 0. Returns the function that counts one delivery.
 */
export function originCounters(registry: Registry): (originReason: string, bytes: number) => void {
  const bytes = new Counter({
    name: 'mb_origin_bytes_total',
    help: 'Response bytes the origin delivered itself, by why (no_mirror, origin_only, index_stale, small_file, fallback, rule, local_network, other)',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  const requests = new Counter({
    name: 'mb_origin_requests_total',
    help: 'Requests the origin answered with a file itself (200, 206 or 304), by why',
    labelNames: ['reason'] as const,
    registers: [registry],
  })
  const children = new Map<string, {bytes: {inc(v: number): void}; requests: {inc(): void}}>()
  for (const reason of ORIGIN_METER_REASONS) {
    children.set(reason, {bytes: bytes.labels(reason), requests: requests.labels(reason)})
    bytes.labels(reason).inc(0)
    requests.labels(reason).inc(0)
  }
  return (originReason, sent) => {
    const c = children.get(originMeterReason(originReason))!
    c.requests.inc()
    if (sent > 0) c.bytes.inc(sent)
  }
}
