/**
 * Errors that carry an exit code and an operator-facing message.
 *
 * Every failure that reaches a command should be an {@link MbError}: its message says what
 * was wrong and what to do, and its `exitCode` follows the CLI convention
 * (1 = the operation failed, 2 = the invocation was wrong).
 */
export class MbError extends Error {
  /** Process exit code: 1 for failures, 2 for usage errors. */
  readonly exitCode: number
  /** Stable machine-readable code for `--json` output, e.g. `MIRROR_NOT_FOUND`. */
  readonly code: string

  constructor(message: string, options: {code?: string; exitCode?: number; cause?: unknown} = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.name = 'MbError'
    this.exitCode = options.exitCode ?? 1
    this.code = options.code ?? 'FAILED'
  }
}

/** A bad flag, argument or setting value: exit code 2, nothing was changed. */
export class UsageError extends MbError {
  constructor(message: string, code = 'USAGE') {
    super(message, {code, exitCode: 2})
    this.name = 'UsageError'
  }
}

/** Returns the message of any thrown value. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message
  return String(error)
}
