import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {MbError, UsageError} from '../../lib/errors.js'
import {type Forgotten, forgetFile} from '../../lib/origin/mirror-only.js'
import {trimLeadingSlashes} from '../../lib/text.js'

export default class FileForget extends BaseCommand<typeof FileForget> {
  static override description = `Remove one file from the index, so that mb sends no client to it any more

For a file that must go everywhere (a legal request), above all one the origin pruned that serve.mirror_only keeps redirecting: once forgotten, no redirect, metalink, torrent or mirror list names it, on every mb serve at its next snapshot refresh (seconds). The mirrors' copies are theirs to delete. Delete the file from the origin first: a file still in the tree comes back at the next mb index.`
  static override examples = ['<%= config.bin %> file forget archive/1.0/old.iso', '<%= config.bin %> file forget archive/1.0/old.iso --json']

  static override args = {
    path: Args.string({description: 'the indexed file, relative to the origin root, exact (*, ?, [ and { are part of the name, not a glob)', required: true}),
  }

  public async run(): Promise<Forgotten> {
    const path = trimLeadingSlashes(this.args.path)
    if (path === '' || /(^|\/)\.\.?(\/|$)/.test(path)) throw new UsageError(`${JSON.stringify(this.args.path)} is not a file path relative to the origin root (no "." or ".." segment).`)
    const database = await this.openDb()
    // Exact: a name of the tree may hold *, ?, [ or { (`what?.txt`), and such a file must be
    // forgettable too; a glob that names no file is refused as one.
    const forgotten = await forgetFile(database.db, path)
    if (forgotten === undefined && /[*?[{]/.test(path))
      throw new UsageError(
        `No indexed file ${JSON.stringify(path)}: mb file forget takes one exact path, not a glob; nothing was changed (\`mb file lookup '${path}'\` lists the files a glob matches).`,
      )
    if (forgotten === undefined) throw new MbError(`No indexed file ${path}: nothing was changed (\`mb file lookup '*NAME*'\` lists what is indexed).`, {code: 'FILE_NOT_FOUND'})
    const root = this.mbConfig.root
    const still = root !== undefined && existsSync(join(root, path))
    this.print(
      `Forgot ${path}${forgotten.mirror_only ? ' (mirror-only)' : ''}: mb sends no client to it now` +
        (forgotten.mirrors.length > 0 ? `; mirrors that still hold a copy: ${forgotten.mirrors.join(', ')}` : '') +
        (still ? `.\nwarning: the origin tree still holds ${join(root, path)}; the next mb index adds it back unless you delete it.` : '.'),
    )
    return forgotten
  }
}
