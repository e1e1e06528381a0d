/**
 * Fails when an import in src/ breaks the layer order of docs/architecture.md ("Which folder
 * may import which"), or when files import each other in a cycle. Run by `npm run lint`.
 *
 * Every folder of src/ (a room) sits in one layer of {@link LAYERS}, listed from the bottom
 * up. A file may import files of its own folder and of folders in lower layers; an import of
 * a folder in the same layer or a higher one is reported, and so is a folder that no layer
 * names. A folder's subfolders are rooms of their own (`lib/serve/delivery` is not
 * `lib/serve`); a folder listed with `/**` takes its subfolders in (`commands/**`). Type-only
 * imports count: they couple the folders as much as any other. Cycles are looked for between
 * files, so that they are caught inside a folder too, and between folders of lib/ taken with
 * their subfolders (`lib/serve/**` against `lib/metalink/**`), so that a subfolder placed high
 * cannot make its parent and a room above the parent import each other.
 *
 * Usage: node --import tsx scripts/layers.ts [DIR]   (default DIR: src)
 */
import {readdirSync, readFileSync} from 'node:fs'
import {dirname, join, relative, resolve, sep} from 'node:path'
import {fileURLToPath} from 'node:url'
import ts from 'typescript'

/**
 * The layers of src/, bottom first: folders relative to src/. Keep docs/architecture.md's
 * table in step with this list.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ['lib', 'types'],
  ['lib/db', 'lib/sync'],
  ['lib/geo'],
  ['lib/origin'],
  ['lib/mirrors'],
  ['lib/select'],
  ['lib/rules', 'lib/verify'],
  ['lib/scan', 'lib/probe'],
  ['lib/push', 'lib/stats'],
  ['lib/lookup'],
  ['lib/serve', 'lib/serve/snapshot'],
  ['lib/serve/delivery'],
  ['lib/metalink'],
  ['lib/yum', 'lib/apt'],
  ['lib/operator'],
  ['lib/config'],
  ['lib/redirector'],
  ['.'],
  ['hooks/**', 'commands/**'],
]

/** One broken rule: the file, and what is wrong. */
export interface Problem {
  file: string
  message: string
}

/** The .ts files under `root`, sorted, as paths relative to it with `/` separators. */
function sources(root: string): string[] {
  return readdirSync(root, {recursive: true, encoding: 'utf8'})
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.split(sep).join('/'))
    .sort()
}

/** The relative imports of one file (static, dynamic, type-only and re-exports), resolved to paths relative to `root`. */
function importsOf(root: string, file: string): string[] {
  const info = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true)
  return info.importedFiles
    .map((i) => i.fileName)
    .filter((name) => name.startsWith('./') || name.startsWith('../'))
    .map((name) =>
      relative(root, resolve(root, dirname(file), name.replace(/\.js$/, '.ts')))
        .split(sep)
        .join('/'),
    )
}

/** The layer index of a file's folder, or undefined when no layer names it. */
function layerOf(folder: string, layers: readonly (readonly string[])[]): number | undefined {
  for (let i = 0; i < layers.length; i++) {
    for (const room of layers[i]) {
      if (room === folder) return i
      if (room.endsWith('/**') && (folder === room.slice(0, -3) || folder.startsWith(room.slice(0, -2)))) return i
    }
  }
  return undefined
}

/** A folder together with its subfolders: `lib/NAME` for a folder under lib/, else its first segment. */
function familyOf(folder: string): string {
  const parts = folder.split('/')
  return parts[0] === 'lib' && parts.length > 1 ? parts.slice(0, 2).join('/') : parts[0]
}

/** The cycles between families of folders (see {@link familyOf}), each with one import per step as its example. */
function familyCycles(graph: Map<string, string[]>): Problem[] {
  const edges = new Map<string, Map<string, string>>()
  for (const [file, targets] of graph) {
    const from = familyOf(folderOf(file))
    for (const target of targets) {
      const to = familyOf(folderOf(target))
      if (from === to) continue
      if (!edges.has(from)) edges.set(from, new Map())
      if (!edges.get(from)!.has(to)) edges.get(from)!.set(to, `${file} imports ${target}`)
    }
  }
  const families = new Map([...edges].map(([from, to]) => [from, [...to.keys()]]))
  return cycles(families).map((cycle) => {
    const examples = cycle.flatMap((from) => cycle.filter((to) => edges.get(from)?.has(to)).map((to) => edges.get(from)!.get(to)!))
    return {file: cycle[0], message: `folders ${cycle.map((f) => `${f}/`).join(', ')} (with their subfolders) import each other: ${examples.join('; ')}`}
  })
}

/** A file's folder relative to `root` ('.' for a file at the top). */
function folderOf(file: string): string {
  const dir = dirname(file)
  return dir === '' ? '.' : dir
}

/** The cycles of the import graph (its strongly connected components of more than one file, or a file importing itself), each sorted. */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (v: string) => {
    index.set(v, next)
    low.set(v, next)
    next++
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort())
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found
}

/**
 * Checks the tree under `root` against `layers`: every import goes to the importer's own
 * folder or to a lower layer, every folder is in a layer, and no files (nor folders of lib/
 * with their subfolders) import each other in a cycle. Imports that leave `root` (migrations/, packages) are not checked.
 */
export function checkLayers(root: string, layers: readonly (readonly string[])[] = LAYERS): Problem[] {
  const problems: Problem[] = []
  const files = sources(root)
  const known = new Set(files)
  const graph = new Map<string, string[]>()
  for (const file of files) {
    const folder = folderOf(file)
    const layer = layerOf(folder, layers)
    if (layer === undefined) problems.push({file, message: `folder ${folder}/ is in no layer: add it to LAYERS in scripts/layers.ts and to docs/architecture.md`})
    const targets = importsOf(root, file).filter((target) => known.has(target))
    graph.set(file, targets)
    if (layer === undefined) continue
    for (const target of targets) {
      const to = folderOf(target)
      if (to === folder) continue
      const toLayer = layerOf(to, layers)
      if (toLayer !== undefined && toLayer < layer) continue
      const where = toLayer === undefined ? 'a folder in no layer' : toLayer === layer ? 'a folder of the same layer' : 'a higher layer'
      problems.push({file, message: `imports ${target} from ${where} (${folder}/ may import only its own folder and lower layers)`})
    }
  }
  for (const cycle of cycles(graph)) problems.push({file: cycle[0], message: `import cycle among ${cycle.join(', ')}`})
  problems.push(...familyCycles(graph))
  return problems
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = process.argv[2] ?? 'src'
  const problems = checkLayers(root)
  for (const p of problems) console.log(`${join(root, p.file)}: ${p.message}`)
  if (problems.length > 0) {
    console.error(`${problems.length} import(s) against the layer order or in a cycle. See "Which folder may import which" in docs/architecture.md.`)
    process.exit(1)
  }
}
