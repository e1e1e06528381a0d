/**
 * Pacing of the interval flusher: after each batch it waits as long as the batch took (at
 * most 1 s), so that a large flush takes at most half of the database's time instead of a
 * burst that starves the requests served beside it (PostgreSQL often shares the host). An
 * unpaced flush (shutdown, tests) asked for meanwhile ends the waiting.
 */

/** The pace of one collector's flushes. */
export class Pacer {
  private hurry = true

  /** A flush starts, paced or not. */
  start(paced: boolean): void {
    this.hurry = !paced
  }

  /** An unpaced flush is asked for: a paced flush in progress stops waiting between batches. */
  hurryUp(): void {
    this.hurry = true
  }

  /** After a batch that started at `startedAt` (`performance.now()` ms): waits as long as it took, unless hurried. */
  async afterBatch(startedAt: number): Promise<void> {
    if (!this.hurry) await sleep(Math.min(1000, performance.now() - startedAt))
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
