/**
 * {@link startLoad} in a process of its own, for a test whose server the test process cannot
 * reach (one inside a network namespace): `node --import tsx load-process.ts PORT TARGET
 * OPTIONS_JSON` ({@link LoadOptions}). It prints the counts so far ({@link LoadResult}) as
 * one JSON line every 100 ms and, on SIGTERM, stops the loops (each after its current
 * request), prints the final counts and exits. It also exits when its stdin closes: the test
 * that started it has ended, failed or not. Started by {@link startLoadIn}.
 */
import {type LoadOptions, type LoadResult, startLoad} from './load.js'

const [port, target, options] = process.argv.slice(2)
const load = startLoad(Number(port), target, JSON.parse(options) as LoadOptions)
const print = (result: LoadResult) => process.stdout.write(`${JSON.stringify(result)}\n`)
const ticker = setInterval(() => print(load.result), 100)
process.once('SIGTERM', async () => {
  clearInterval(ticker)
  print(await load.stop())
  process.exit(0)
})
process.stdin.on('end', () => process.exit(2))
process.stdin.resume()
