/**
 * `npm run bench [-- NAME] [ARGS...]`: dispatches to a benchmark module's exported `main(args)`.
 * No name (or a leading `--flag`) runs the serve benchmark (bench/serve.ts). Other benchmarks
 * add a line to BENCHES.
 */
import {existsSync} from 'node:fs'
import {fileURLToPath} from 'node:url'

const BENCHES: Record<string, string> = {
  serve: './serve.ts',
  scan: './scan.ts',
  meta4: './meta4.ts',
  stats: './stats.ts',
  'origin-check': './origin-check.ts',
  replicas: './replicas.ts',
  demand: './demand.ts',
  curves: './curves.ts',
  embedded: './embedded.ts',
  overview: './overview.ts',
  'origin-share': './origin-share.ts',
  'mirror-page': './mirror-page.ts',
  content: './content.ts',
}

async function run(): Promise<void> {
  const argv = process.argv.slice(2)
  const name = argv[0] && !argv[0].startsWith('-') ? argv.shift()! : 'serve'
  const module = BENCHES[name]
  if (!module) {
    console.error(`Unknown benchmark "${name}". Available: ${Object.keys(BENCHES).join(', ')}`)
    process.exit(2)
  }
  if (!existsSync(fileURLToPath(new URL(module, import.meta.url)))) {
    console.error(`Benchmark "${name}" (bench/${module.slice(2)}) is not there yet.`)
    process.exit(2)
  }
  const loaded = (await import(module)) as {main(args: string[]): Promise<void>}
  await loaded.main(argv)
}

run().then(
  () => process.exit(0),
  (error) => {
    console.error(error instanceof Error ? error.stack : error)
    process.exit(1)
  },
)
