/**
 * Retries under `mb serve --workers N` (./cluster.ts): each worker decides on its own memory
 * (../delivery/retry.ts; nothing on the redirect path waits for another process), and tells its
 * siblings of every answer it remembers through the cluster primary, which relays it. A
 * client's retry, which the kernel may hand to any worker, so finds its last answer there.
 *
 * The answers of one event-loop turn travel as one message (a flat array of key, attempt,
 * mirror id: numbers), sent when the turn ends: under load one IPC write per turn, not per request;
 * idle, a sibling knows within about a millisecond, long before a client gives up on a mirror
 * and asks again.
 */
import cluster, {type Worker} from 'node:cluster'
import type {Retries} from '../serve/delivery/retry.js'

/** The IPC message of a worker's answers: `answers` is [key, attempt, mirrorId, key, …], all numbers. */
interface RetryMessage {
  type: 'mb:retries'
  answers: number[]
}

function isRetryMessage(message: unknown): message is RetryMessage {
  return typeof message === 'object' && message !== null && (message as {type?: unknown}).type === 'mb:retries' && Array.isArray((message as {answers?: unknown}).answers)
}

/**
 * In a `--workers` worker: sends every answer `retries` remembers to the primary (batched per
 * event-loop turn) and merges the answers the primary relays from the siblings, for the life
 * of the worker (its IPC channel closes when it stops).
 */
export function shareRetries(retries: Retries): void {
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
  retries.onRemember((key, attempt, mirrorId) => {
    batch.push(key, attempt, mirrorId)
    if (!scheduled) {
      scheduled = true
      setImmediate(send)
    }
  })
  const onMessage = (message: unknown) => {
    if (!isRetryMessage(message)) return
    const a = message.answers
    for (let i = 0; i + 2 < a.length; i += 3) retries.merge(Number(a[i]), Number(a[i + 1]), Number(a[i + 2]))
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
