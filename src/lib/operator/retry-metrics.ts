/**
 * The retry memory's per-mirror series (src/lib/select/retry.ts, ../serve/delivery/retry.ts):
 * the retry signals a mirror drew and the clients it bounced straight back. Both counted from
 * the request records by ./metrics.ts, summed over `--workers`.
 */
import {Counter, type Registry} from 'prom-client'

/** `mb_mirror_retries_total{mirror}`: the retry signals, at most one per client address, path and retry window (src/lib/select/retry.ts). */
export function retriesCounter(registry: Registry): Counter<'mirror'> {
  return new Counter({
    name: 'mb_mirror_retries_total',
    help: 'Downloads retried away from the mirror: the client had been sent there and asked again for the same file (once per client address, path and retry window)',
    labelNames: ['mirror'] as const,
    registers: [registry],
  })
}

/** `mb_redirect_loops_total{mirror}`: clients a mirror sent straight back to mb (../serve/delivery/retry.ts, `bouncedFrom`). */
export function loopsCounter(registry: Registry): Counter<'mirror'> {
  return new Counter({
    name: 'mb_redirect_loops_total',
    help: 'Clients back at mb within a second of a redirect to the mirror (a redirect loop, or a client repeating fast): each was sent to the next mirror of its tier',
    labelNames: ['mirror'] as const,
    registers: [registry],
  })
}
