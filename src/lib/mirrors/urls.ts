import {numericHostProblem} from '../net.js'
import {CONTROL, describeChar, FIELD_FLAGS, invalidField} from './fields.js'
type UrlField = 'http_url' | 'https_url' | 'rsync_url' | 'ftp_url'

const URL_RULES: Record<UrlField, {schemes: string[]; example: string; credentials: boolean}> = {
  http_url: {schemes: ['http:'], example: 'http://mirror.example.org/pub/', credentials: false},
  https_url: {schemes: ['https:'], example: 'https://mirror.example.org/pub/', credentials: false},
  rsync_url: {schemes: ['rsync:'], example: 'rsync://mirror.example.org/module/ or mirror.example.org::module/', credentials: true},
  ftp_url: {schemes: ['ftp:', 'ftps:'], example: 'ftp://mirror.example.org/pub/ or ftps://…', credentials: true},
}

/**
 * Validates and normalises a mirror base URL for one protocol field:
 * - `http_url`: `http://` only; `https_url`: `https://` only; neither may carry credentials
 *   (they are sent to clients in redirects);
 * - `rsync_url`: `rsync://[user[:password]@]host[:port]/module[/path]`, or the daemon form
 *   `[user@]host::module[/path]`, which is rewritten to the `rsync://` form; a module is required;
 * - `ftp_url`: `ftp://` or `ftps://`, credentials allowed.
 * The result has a host, no query or fragment, and a path ending in '/'. Passwords are
 * kept in the stored value (scans need them) but redacted in every message.
 * @throws UsageError naming the field, the (redacted) value and the expected form
 */
export function normalizeMirrorUrl(field: UrlField, text: string): string {
  const rule = URL_RULES[field]
  let value = text.trim()
  if (field === 'rsync_url') {
    const daemon = /^(?:([^@/\s]+)@)?([^:/@\s]+|\[[0-9a-fA-F:.]+\])::([^\s]*)$/.exec(value)
    if (daemon && !value.includes('://')) value = `rsync://${daemon[1] ? `${daemon[1]}@` : ''}${daemon[2]}/${daemon[3]}`
  }
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw invalidField(field, text, `expected a URL such as ${rule.example}`)
  }
  if (!rule.schemes.includes(url.protocol)) {
    throw invalidField(field, text, `${FIELD_FLAGS[field]} takes ${rule.schemes.map((s) => `${s}//`).join(' or ')} URLs only, e.g. ${rule.example}`)
  }
  if (!url.hostname) throw invalidField(field, text, `the URL has no host; expected e.g. ${rule.example}`)
  const hostProblem = numericHostProblem(rawHost(value))
  if (hostProblem) throw invalidField(field, text, `the host is an IPv4 address in a legacy form: ${hostProblem}`)
  if (url.search || url.hash || value.includes('?') || value.includes('#')) throw invalidField(field, text, `a base URL has no query or fragment; expected e.g. ${rule.example}`)
  if ((url.username || url.password) && !rule.credentials) {
    throw invalidField(field, text, `credentials are not allowed in ${FIELD_FLAGS[field]} (redirects would show them to every client)`)
  }
  if (CONTROL.test(value) || /\s/.test(value)) throw invalidField(field, text, 'a URL has no whitespace or control characters (percent-encode them)')
  if (!url.pathname.endsWith('/')) url.pathname += '/'
  if (field === 'rsync_url' && url.pathname.replace(/\/+/g, '/') === '/') throw invalidField(field, text, `an rsync URL names a module, e.g. ${rule.example}`)
  return url.toString()
}

/** Characters a POSIX shell gives a meaning to (and whitespace): never part of a push target, which may reach a remote shell over ssh. */
const SHELL_META = /[\s;&|$`<>(){}[\]*?!#~'"\\^]/u

/**
 * Validates and normalises a mirror's push target (`--push-url`), where `mb push` uploads:
 * - an rsync daemon module that accepts uploads: `rsync://[user[:password]@]host[:port]/module[/path]`,
 *   or `[user@]host::module[/path]` (rewritten to the `rsync://` form); a module is required;
 * - a path over ssh: `[user@]host:path` (rsync(1), "USAGE": a single colon means a remote
 *   shell), the path relative to the login directory or absolute.
 * Refused: any shell metacharacter or whitespace (over ssh the remote shell reads the path),
 * a host or user starting with '-' (it would read as an option), a query or fragment.
 * The result ends in '/'.
 * @throws UsageError naming --push-url, the (redacted) value and the expected forms
 */
export function normalizePushUrl(text: string): string {
  const value = text.trim()
  const forms = 'rsync://host/module/path/, host::module/path/ or user@host:path/'
  // An IPv6 host in brackets (RFC 3986 §3.2.2) is the one place '[' and ']' belong.
  const unbracketed = value.replace(/(^|@|\/\/)\[[0-9a-fA-F:.]+\]/, '$1host')
  if (CONTROL.test(value) || SHELL_META.test(unbracketed)) {
    const bad = [...unbracketed].find((c) => CONTROL.test(c) || SHELL_META.test(c)) ?? ''
    throw invalidField('push_url', text, `character ${describeChar(bad)} is a shell metacharacter or whitespace, which a push target may not hold (the remote shell would read it); expected ${forms}`)
  }
  const ssh = /^(?:([A-Za-z0-9._][A-Za-z0-9._-]*)@)?([A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9a-fA-F:.]+\]):(?!:)(.*)$/.exec(value)
  if (ssh && !value.includes('://')) {
    const path = ssh[3]
    if (path.split('/').includes('..')) throw invalidField('push_url', text, `the path may not hold '..'; expected ${forms}`)
    return `${ssh[1] ? `${ssh[1]}@` : ''}${ssh[2]}:${path === '' || path.endsWith('/') ? path : `${path}/`}`
  }
  try {
    return normalizeMirrorUrl('rsync_url', value)
  } catch (error) {
    throw invalidField('push_url', text, `expected ${forms} (${(error as Error).message.replace(/^Invalid --rsync-url "[^"]*": /, '')})`)
  }
}

/** The host of a URL as written (before the URL parser rewrites a numeric one): after `//` and any `user@`, before a port or path. */
function rawHost(url: string): string {
  const authority = url.slice(url.indexOf('//') + 2).split(/[/?#]/, 1)[0]
  const host = authority.slice(authority.lastIndexOf('@') + 1)
  return host.startsWith('[') ? host : host.replace(/:[0-9]*$/, '')
}
