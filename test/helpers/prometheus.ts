/**
 * A typed wrapper of `parse-prometheus-text-format` (which publishes no types), for tests
 * that read `/metrics`. Note: it drops a histogram's own labels; read those from the text.
 */
// @ts-expect-error the package has no type declarations
import parse from 'parse-prometheus-text-format'

export interface PromSample {
  value?: string
  labels?: Record<string, string>
  buckets?: Record<string, string>
  count?: string
  sum?: string
}

export interface PromFamily {
  name: string
  help: string
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED'
  metrics: PromSample[]
}

/** Parses Prometheus text exposition format 0.0.4; throws on malformed input. */
export const parsePrometheus = parse as (text: string) => PromFamily[]
