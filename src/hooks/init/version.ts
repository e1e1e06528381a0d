/**
 * oclif `init` hook: `mb --version` (and `-v`) prints mb's version, the schema version it
 * expects (its latest migration) and the Node.js version, e.g.
 * `mb 0.1.0 (schema 0009_mirror_maintenance, node v20.20.2, linux-x64)`.
 *
 * oclif prints `config.userAgent` for the version flags right after this hook, so the hook
 * sets that line; every other command leaves it alone.
 */
import type {Hook} from '@oclif/core'
import {expectedSchemaVersion} from '../../lib/db/migrate.js'

const VERSION_FLAGS = new Set(['--version', '-v'])

const hook: Hook.Init = async (options) => {
  if (!VERSION_FLAGS.has(options.id ?? '')) return
  const {config} = options
  // Typed read-only, but a plain property that Config.load() sets and main.run() prints.
  ;(config as {userAgent: string}).userAgent = `${config.name} ${config.version} (schema ${expectedSchemaVersion()}, node ${process.version}, ${config.platform}-${config.arch})`
}

export default hook
