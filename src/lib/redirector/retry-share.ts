/**
 * Retries under `mb serve --workers N` (./cluster.ts): each worker decides on its own memory
 * (../serve/delivery/retry.ts; nothing on the redirect path waits for another process), and tells its
 * siblings of every answer it remembers through the cluster primary, which relays it. A
 * client's retry, which the kernel may hand to any worker, so finds its last answer there.
 *
 * The keys are hashed under one secret: the primary chooses it at start and hands it to every
 * worker it forks, replacements included, in the environment ({@link retrySecretEnv}).
 *
 * The answers of one event-loop turn travel as one message (a flat array of key, attempt,
 * mirror id and whether the answer took its window's retry signal: numbers), sent when the turn ends: under load one IPC write per turn, not per request;
 * idle, a sibling knows within about a millisecond, long before a client gives up on a mirror
 * and asks again.
 */
import cluster, {type Worker} from 'node:cluster'
import {newRetrySecret, parseRetrySecret, type RetrySecret, retrySecretText} from '../select/retry.js'
import type {Retries} from '../serve/delivery/retry.js'

/** The environment variable that carries the primary's retry secret to its workers (never read from a user's environment otherwise). */
const SECRET_ENV = 'MB_RETRY_SECRET_INTERNAL'

/** In the `--workers` primary: the environment that hands every worker (and every replacement) one fresh secret for the retry memory's keys. */
export function retrySecretEnv(): Record<string, string> {
  return {[SECRET_ENV]: retrySecretText(newRetrySecret())}
}

/**
 * In a `--workers` worker: the secret its primary chose, taken out of the environment (so
 * that no child process inherits it); undefined when absent.
 */
function workerRetrySecret(): RetrySecret | undefined {
  const secret = parseRetrySecret(process.env[SECRET_ENV])
  delete process.env[SECRET_ENV]
  return secret
}

/** The IPC message of a worker's answers: `answers` is [key, attempt, mirrorId, signalled (0 or 1), key, …], all numbers. */
interface RetryMessage {
  type: 'mb:retries'
  answers: number[]
}

function isRetryMessage(message: unknown): message is RetryMessage {
  return typeof message === 'object' && message !== null && (message as {type?: unknown}).type === 'mb:retries' && Array.isArray((message as {answers?: unknown}).answers)
}

/**
 * In a `--workers` worker, before it answers: keys `retries` with the primary's secret, sends
 * every answer it remembers to the primary (batched per event-loop turn) and merges the
 * answers the primary relays from the siblings, for the life of the worker (its IPC channel
 * closes when it stops).
 */
export function shareRetries(retries: Retries): void {
  const secret = workerRetrySecret()
  if (secret !== undefined) retries.adoptSecret(secret)
  let batch: number[] = []
  let scheduled = false
  const send = () => {
    scheduled = false
    const answers = batch
    batch = []
    if (!process.send || !process.connected) return
    const message: RetryMessage = {type: 'mb:retries', answers}
    process.send(message)
  }
  retries.onRemember((key, attempt, mirrorId, signalled) => {
    batch.push(key, attempt, mirrorId, signalled ? 1 : 0)
    if (!scheduled) {
      scheduled = true
      setImmediate(send)
    }
  })
  const onMessage = (message: unknown) => {
    if (!isRetryMessage(message)) return
    const a = message.answers
    for (let i = 0; i + 3 < a.length; i += 4) retries.merge(Number(a[i]), Number(a[i + 1]), Number(a[i + 2]), a[i + 3] === 1)
  }
  process.on('message', onMessage)
}

/**
 * In the `--workers` cluster primary: relays each worker's answers to every other live
 * worker. Returns a function that stops relaying.
 */
export function relayRetries(): () => void {
  const onMessage = (from: Worker, message: unknown) => {
    if (!isRetryMessage(message)) return
    for (const w of Object.values(cluster.workers ?? {})) {
      if (w !== undefined && w !== from && w.isConnected()) w.send(message)
    }
  }
  cluster.on('message', onMessage)
  return () => {
    cluster.off('message', onMessage)
  }
}
