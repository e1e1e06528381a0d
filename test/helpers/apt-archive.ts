/**
 * A tiny Debian archive and a hermetic apt, for the e2e tests that put apt 2.6 in front of
 * `mb serve`'s mirror list (`mirror+http://…/debian/mirrors.txt`).
 */
import {execFile} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {gzipSync} from 'node:zlib'

const exec = promisify(execFile)

/** The package's path in the archive (under `ROOT/debian/`). */
export const APT_DEB = 'pool/main/m/mb-hello/mb-hello_1.0_all.deb'
/** The package's file name, as `apt-get download` saves it. */
export const APT_DEB_NAME = 'mb-hello_1.0_all.deb'

/**
 * Builds the archive under `root/debian`: the `mb-hello` .deb (dpkg-deb), Packages and
 * Packages.gz (dpkg-scanpackages) and a Release with their SHA-256 sums; `work` holds the
 * package's build tree. `payloadBytes` random bytes in the package make the .deb at least
 * that large (gzip does not shrink them), e.g. above `select.min_size`.
 */
export async function buildAptArchive(work: string, root: string, options: {payloadBytes?: number} = {}): Promise<void> {
  const pkg = join(work, 'pkg')
  mkdirSync(join(pkg, 'DEBIAN'), {recursive: true})
  mkdirSync(join(pkg, 'usr', 'share', 'mb-hello'), {recursive: true})
  writeFileSync(join(pkg, 'DEBIAN', 'control'), 'Package: mb-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: mb <mb@example.org>\nDescription: tiny test package for mb\n')
  writeFileSync(join(pkg, 'usr', 'share', 'mb-hello', 'hello.txt'), 'hello\n')
  if (options.payloadBytes) writeFileSync(join(pkg, 'usr', 'share', 'mb-hello', 'payload.bin'), randomBytes(options.payloadBytes))
  const archive = join(root, 'debian')
  mkdirSync(join(archive, 'pool', 'main', 'm', 'mb-hello'), {recursive: true})
  mkdirSync(join(archive, 'dists', 'stable', 'main', 'binary-amd64'), {recursive: true})
  await exec('dpkg-deb', ['--root-owner-group', '-Zgzip', '--build', pkg, join(archive, APT_DEB)])
  const {stdout: packages} = await exec('dpkg-scanpackages', ['--multiversion', 'pool', '/dev/null'], {cwd: archive})
  const lists = {'main/binary-amd64/Packages': Buffer.from(packages), 'main/binary-amd64/Packages.gz': gzipSync(packages)}
  let release = 'Suite: stable\nCodename: stable\nComponents: main\nArchitectures: amd64\nDate: Wed, 02 Dec 2026 00:00:00 UTC\nSHA256:\n'
  for (const [name, bytes] of Object.entries(lists)) {
    writeFileSync(join(archive, 'dists', 'stable', name), bytes)
    release += ` ${createHash('sha256').update(bytes).digest('hex')} ${bytes.length} ${name}\n`
  }
  writeFileSync(join(archive, 'dists', 'stable', 'Release'), release)
}

/** One apt-get run: its exit code (100 for apt's own errors such as "Hash Sum mismatch") and output. */
export interface AptRun {
  code: number
  stdout: string
  stderr: string
}

/**
 * An apt-get with every piece of state (sources, lists, cache, status, config) under `dir`,
 * reading `deb [trusted=yes] mirror+MIRRORLIST stable main`: nothing of the host's apt is
 * read or written. Acquire::Retries=0 keeps one run one attempt per file. The runner never
 * throws: a failed run gives its exit code.
 * @param dir a private directory (created)
 * @param mirrorList the mirror list's URL, e.g. `http://127.0.0.1:8080/debian/mirrors.txt`
 */
export function hermeticApt(dir: string, mirrorList: string): (args: string[], options?: {cwd?: string; timeoutMs?: number}) => Promise<AptRun> {
  for (const sub of ['state/lists/partial', 'cache/archives/partial', 'etc/apt.conf.d', 'etc/preferences.d', 'etc/trusted.gpg.d']) mkdirSync(join(dir, sub), {recursive: true})
  writeFileSync(join(dir, 'etc', 'sources.list'), `deb [trusted=yes] mirror+${mirrorList} stable main\n`)
  writeFileSync(join(dir, 'status'), '')
  const settings = [
    `Dir::Etc=${dir}/etc`,
    `Dir::Etc::sourcelist=${dir}/etc/sources.list`,
    'Dir::Etc::sourceparts=-',
    `Dir::State=${dir}/state`,
    `Dir::State::status=${dir}/status`,
    `Dir::Cache=${dir}/cache`,
    'Debug::NoLocking=1',
    'APT::Architecture=amd64',
    'APT::Architectures=amd64',
    'APT::Sandbox::User=root',
    'Acquire::Languages=none',
    'Acquire::Retries=0',
  ].flatMap((o) => ['-o', o])
  return async (args, options = {}) => {
    try {
      const {stdout, stderr} = await exec('apt-get', [...settings, ...args], {cwd: options.cwd, timeout: options.timeoutMs ?? 120_000})
      return {code: 0, stdout, stderr}
    } catch (error) {
      const e = error as {code?: number | string; stdout?: string; stderr?: string}
      return {code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: `${e.stderr ?? ''}${typeof e.code === 'number' ? '' : String(error)}`}
    }
  }
}
