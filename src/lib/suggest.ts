/**
 * "Did you mean": the known name closest to a mistyped one (a flag, a setting), by edit
 * distance with transpositions (optimal string alignment: `listne` is one edit from
 * `listen`). A name further than about a third of its length from every candidate gets no
 * suggestion: a guess that far off misleads more than it helps.
 */

/** Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({length: a.length + 1}, (_, i) => [i, ...Array<number>(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
}

/**
 * The candidate closest to `word` (case-insensitive), or undefined when none is close
 * enough: at most 1 edit for names up to 3 characters, 2 up to 6, 3 beyond. On a tie the
 * earlier candidate wins.
 */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const w = word.toLowerCase()
  const limit = w.length <= 3 ? 1 : w.length <= 6 ? 2 : 3
  let best: string | undefined
  let bestDistance = limit + 1
  for (const candidate of candidates) {
    const distance = editDistance(w, candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return best
}
