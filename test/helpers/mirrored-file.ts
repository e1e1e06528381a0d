/**
 * A world the metalink, torrent and zsync tests share: an origin tree holding one file, a
 * test database that has indexed and hashed it, and nginx mirrors on loopback, each with its
 * own tree holding a copy, registered as mirrors that hold the file (never probed: `up` is
 * unset, as after `mb mirror add --no-probe`).
 *
 *   before(async function () { requireBinary(this, 'nginx', 'nginx-light'); world = await mirroredFile({...}) })
 *   after(() => world?.close())
 */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import type {Database} from '../../src/lib/db/index.js'
import {hashIndex} from '../../src/lib/origin/hash.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {createTestDatabase, type TestDatabase} from './db.js'
import {type NginxOptions, type RunningServer, startNginx} from './servers.js'

/** One mirror of the world. */
export interface WorldMirror {
  identifier: string
  /** ISO 3166 country code (default DE); the continent is EU. */
  country?: string
  /** nginx options beyond its root (its tree, which `tree` returns for the config to name). */
  nginx?: (tree: string) => Omit<NginxOptions, 'root'>
}

/** The running world. */
export interface MirroredFile {
  test: TestDatabase
  database: Database
  /** The origin tree. */
  root: string
  /** An empty directory for the clients' downloads. */
  out: string
  /** Each mirror's tree, in the order given. */
  trees: string[]
  /** Each mirror's nginx, in the order given. */
  mirrors: RunningServer[]
  /** Each mirror's id, in the order given. */
  ids: number[]
  /** Stops the mirrors, closes and drops the database, removes every directory. */
  close(): Promise<void>
}

/**
 * A new test database holding the index of origin tree `root`, with its hashes (`hash`:
 * `jobs` and `zsyncMinSize` for the index's hashing), and a connection to it; the caller
 * closes the connection and drops the database.
 */
export async function hashedOrigin(root: string, hash: {jobs?: number; zsyncMinSize?: number} = {}): Promise<{test: TestDatabase; database: Database}> {
  const test = await createTestDatabase()
  const database = await test.open()
  try {
    await indexOrigin(database.db, root)
    await hashIndex(database, root, {jobs: hash.jobs ?? 1, zsyncMinSize: hash.zsyncMinSize})
    return {test, database}
  } catch (error) {
    await database.close()
    await test.drop()
    throw error
  }
}

/**
 * Builds the world: `data` at `path` in a new origin tree and in each mirror's tree, the
 * origin indexed and hashed (`hash` passes `jobs` and `zsyncMinSize` to the index's hashing),
 * and `mirrors` started and registered as holding the file.
 * @param prefix  names the temporary directories (`mb-PREFIX-origin-…`)
 */
export async function mirroredFile(options: {prefix: string; path: string; data: Buffer; mirrors: WorldMirror[]; hash?: {jobs?: number; zsyncMinSize?: number}}): Promise<MirroredFile> {
  const {prefix, path, data} = options
  const place = (dir: string) => {
    mkdirSync(join(dir, dirname(path)), {recursive: true})
    writeFileSync(join(dir, path), data)
  }
  const root = mkdtempSync(join(tmpdir(), `mb-${prefix}-origin-`))
  const out = mkdtempSync(join(tmpdir(), `mb-${prefix}-out-`))
  const trees: string[] = []
  const mirrors: RunningServer[] = []
  let store: {test: TestDatabase; database: Database} | undefined
  const close = async () => {
    for (const m of mirrors) await m.stop()
    await store?.database.close()
    await store?.test.drop()
    for (const dir of [root, out, ...trees]) rmSync(dir, {recursive: true, force: true})
  }
  try {
    place(root)
    for (const m of options.mirrors) {
      const tree = mkdtempSync(join(tmpdir(), `mb-${prefix}-${m.identifier}-`))
      trees.push(tree)
      place(tree)
      mirrors.push(await startNginx({...m.nginx?.(tree), root: tree}))
    }
    store = await hashedOrigin(root, options.hash)
    const {test, database} = store
    const ids: number[] = []
    for (const [i, m] of options.mirrors.entries()) {
      const row = await database.db
        .insertInto('mirror')
        .values({identifier: m.identifier, http_url: mirrors[i].url, country: m.country ?? 'DE', continent: 'EU', last_scan_ok_at: new Date()} as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      ids.push(row.id)
    }
    await database.db.updateTable('file').set({mirrors: ids}).execute()
    return {test, database, root, out, trees, mirrors, ids, close}
  } catch (error) {
    await close()
    throw error
  }
}
