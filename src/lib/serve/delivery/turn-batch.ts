/**
 * Answers written together at the end of the event loop's turn instead of one by one as
 * each request is handled.
 *
 * One `epoll_wait` hands node every connection with a request waiting; node parses and
 * handles them one after another in the poll phase. Written as soon as each is handled, the
 * answers leave at intervals of one request's handling, and a client process on the same
 * host (a reverse proxy in front of mb, a load generator) has gone back to sleep between two
 * of them: each `write` then pays for waking it (on another core, an inter-processor
 * interrupt, dear in a virtual machine), in system time charged to mb. Queued and written
 * back to back in the check phase that follows (`setImmediate`), the answers after the first
 * find that client awake. The delay an answer gains is the handling of the rest of its
 * batch: a batch that reaches `maxItems` is written at once, so that a turn with thousands
 * of requests ready does not hold its first answers for the handling of all the others
 * (about 25 µs each here: 32 answers wait 0.8 ms at most). Nothing waits when one request
 * came alone. The order of the answers on one connection is node's and is kept.
 */
export class TurnBatch<T> {
  private items: T[] = []
  private scheduled = false

  /**
   * @param write  writes one queued answer (it must not throw for a closed connection: node
   *               drops writes to a destroyed socket)
   * @param failed called with an item whose `write` threw, and the error
   * @param maxItems items queued at most: the one that fills the batch writes it at once
   */
  constructor(
    private readonly write: (item: T) => void,
    private readonly failed: (item: T, error: unknown) => void,
    private readonly maxItems = 32,
  ) {}

  /** Queues `item` for the end of this turn of the event loop (or writes the batch it fills). */
  add(item: T): void {
    this.items.push(item)
    if (this.items.length >= this.maxItems) {
      this.writeQueued()
      return
    }
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(this.flush)
  }

  /** Answers queued and not written yet. */
  get size(): number {
    return this.items.length
  }

  private readonly flush = (): void => {
    this.scheduled = false
    this.writeQueued()
  }

  private writeQueued(): void {
    const items = this.items
    this.items = []
    for (let i = 0; i < items.length; i++) {
      try {
        this.write(items[i])
      } catch (error) {
        this.failed(items[i], error)
      }
    }
  }
}

/** An answer queued in a {@link TurnBatch} by a route: its request, and what writes the answer and reports it. */
export interface LaterAnswer<C> {
  ctx: C
  write: () => void
}

/** Writes a {@link LaterAnswer} (the `write` of a batch of them). */
export function writeLater<C>(answer: LaterAnswer<C>): void {
  answer.write()
}
