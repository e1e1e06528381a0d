/**
 * The answers of redirect rules (src/lib/rules) that send a request elsewhere than to a
 * mirror: a `url` rule's redirect, an `origin` rule's local delivery. A `mirrors` rule
 * only narrows the selection and is answered by the server's redirect path.
 */
import {type RuleMatch, ruleLocation} from '../../rules/rule.js'
import {headerSafe} from '../../text.js'
import type {FileEntry} from '../snapshot/file-entry.js'
import type {RequestContext, RouteServices} from './route.js'

/** What the rule answers need of the server. */
export interface RuleAnswers extends Pick<RouteServices, 'clientInfo' | 'deliver' | 'finish'> {
  /** The catch-all: 500 with a log line. */
  fail(ctx: RequestContext, error: unknown): void
  /** `{Server: 'mb/VERSION'}`, or nothing when no version was given. */
  serverHeaders(): Record<string, string>
}

/**
 * Answers a request a `url` or `origin` rule decided: a redirect with the rule's status to
 * its URL (RFC 9110 §15.4; per-client, so `private, no-store` as for mirror redirects), or
 * local delivery with `X-MB-Origin-Reason: rule`.
 */
export function answerRule(server: RuleAnswers, ctx: RequestContext, rule: RuleMatch, file: FileEntry): void {
  if (rule.target === 'origin') {
    ctx.res.setHeader('X-MB-Rule', rule.name)
    server.deliver(ctx, 'rule').catch((error) => server.fail(ctx, error))
    return
  }
  redirectByRule(server, ctx, rule, file.path, file.size)
}

/**
 * A `url` rule on a path that is no indexed file (a directory, a page outside the download
 * tree, a file not indexed yet): redirected as on a file, so a rule sending a country to
 * another store works for every page. `origin` and `mirrors` rules need the indexed file:
 * without one the request goes on as if no rule matched. False when no `url` rule applies.
 */
export function ruleOffIndex(server: RuleAnswers, ctx: RequestContext): boolean {
  const client = server.clientInfo(ctx)
  if (client === undefined) return false
  // Not memoised on ctx unless it answers: a rule that does not decide is not counted as a hit.
  const rule = ctx.snapshot.rules.match(ctx.path, client)
  if (rule === undefined || rule.target !== 'url') return false
  ctx.rule = rule
  redirectByRule(server, ctx, rule, ctx.path)
  return true
}

/** The redirect of a `url` rule for `path`; `fileSize` in bytes when it is an indexed file. */
function redirectByRule(server: RuleAnswers, ctx: RequestContext, rule: RuleMatch, path: string, fileSize?: number): void {
  const status = rule.rule.record.status
  const headers: Record<string, string> = {
    Location: headerSafe(ruleLocation(rule.rule, path)),
    'X-MB-Rule': rule.name,
    'Cache-Control': 'private, no-store',
    Vary: 'X-Forwarded-For, X-Forwarded-Proto',
    'Content-Length': '0',
    ...server.serverHeaders(),
  }
  ctx.res.writeHead(status, headers)
  ctx.res.end()
  server.finish(ctx, status, 'rule_redirect', fileSize === undefined ? undefined : {fileSize})
}
