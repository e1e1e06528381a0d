/**
 * Nagios/Icinga plugin output for a probe round (Nagios Plugin Development Guidelines:
 * one status line `SERVICE STATE - text | perfdata`, exit 0 OK, 1 WARNING, 2 CRITICAL,
 * 3 UNKNOWN; perfdata `label=value;warn;crit;min;max`).
 */

export const NAGIOS_EXIT = {OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3} as const
export type NagiosState = keyof typeof NAGIOS_EXIT

/** The plugin verdict: state, exit code and the one output line. */
export interface NagiosResult {
  state: NagiosState
  code: number
  line: string
}

/**
 * Judges a round by the share of probed mirrors that are down: CRITICAL when it is at least
 * `critical` percent, WARNING when at least `warning` percent (and above zero), else OK;
 * UNKNOWN when no mirror could be probed.
 *
 * @param counts   mirrors up and down after the round, and the identifiers of the down ones
 * @param warning  percent (0-100)
 * @param critical percent (0-100)
 */
export function nagiosVerdict(counts: {up: number; down: number; downNames?: string[]}, warning: number, critical: number): NagiosResult {
  const total = counts.up + counts.down
  if (total === 0) return nagiosUnknown('no mirror could be probed')
  const share = (counts.down / total) * 100
  const state: NagiosState = counts.down > 0 && share >= critical ? 'CRITICAL' : counts.down > 0 && share >= warning ? 'WARNING' : 'OK'
  const names = counts.downNames && counts.downNames.length > 0 ? ` (down: ${counts.downNames.slice(0, 10).join(', ')}${counts.downNames.length > 10 ? ', ...' : ''})` : ''
  const line = `MB PROBE ${state} - ${counts.up}/${total} mirrors up${names} | up=${counts.up};;;0;${total} down=${counts.down};;;0;${total}`
  return {state, code: NAGIOS_EXIT[state], line}
}

/** An UNKNOWN verdict with a reason (nothing to probe, database unreachable, bad flags). */
export function nagiosUnknown(reason: string): NagiosResult {
  return {state: 'UNKNOWN', code: NAGIOS_EXIT.UNKNOWN, line: `MB PROBE UNKNOWN - ${reason.replaceAll('|', '/').replaceAll('\n', ' ')}`}
}
