/**
 * Credentials out of text: {@link redact} for what operators see (messages, logs, `mb mirror
 * show`, stored scan errors, database locations), {@link stripUserinfo} for URLs handed to the
 * public (mirror lists), which show no user name either.
 */

/** Query parameters whose value is a credential (compared case-insensitively). */
const SECRET_PARAMS = 'password|passwd|pwd|pass|secret|token|access_token|api_key|apikey|key|auth|signature|sig'

/** `//user:password@` anywhere in the text (RFC 3986 §3.2.1 userinfo; the password may hold `@`). */
const USERINFO = /(\/\/)([^\s:@/]*):([^\s/]*)@/g
/** The rsync daemon form `user:password@host::module` (rsync(1), "ACCESSING VIA RSYNC DAEMON"). */
const DAEMON = /(^|[\s"'(])([^\s:@/"'(]+):([^\s@/]+)@([^\s:/@]+::)/g
/** `?password=…` / `&token=…` and the other {@link SECRET_PARAMS}. */
const QUERY = new RegExp(`([?&;](?:${SECRET_PARAMS})=)([^&#\\s"']+)`, 'gi')

/**
 * The text with every credential replaced by `***`, safe to print:
 * - the password in a URL's userinfo (`rsync://user:***@host/module/`), also in free text such
 *   as an error message; the user name stays, an empty password stays empty (`user:@`);
 * - the password of the rsync daemon form `user:***@host::module`;
 * - the value of a password-like query parameter (`?token=***`, see SECRET_PARAMS);
 * - every occurrence of each of `secrets` (e.g. the rsync password from RSYNC_PASSWORD).
 * Text without credentials comes back unchanged; the text need not parse as a URL.
 */
export function redact(text: string, secrets: readonly string[] = []): string {
  let out = text
    .replace(USERINFO, (_m, slashes: string, user: string, password: string) => (password ? `${slashes}${user}:***@` : `${slashes}${user}:@`))
    .replace(DAEMON, '$1$2:***@$4')
    .replace(QUERY, '$1***')
  for (const secret of secrets) if (secret) out = out.split(secret).join('***')
  return out
}

/** `url` without its userinfo (`ftp://user:pw@host/` → `ftp://host/`), for URLs shown to the public. */
export function stripUserinfo(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1')
}
