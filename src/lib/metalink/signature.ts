/**
 * Detached OpenPGP signatures beside origin files: `FILE.asc` (or `FILE.sig`), indexed like
 * any file and smaller than FILE, is FILE's signature. The meta4 carries its text in
 * `<signature mediatype="application/pgp-signature">` (RFC 5854 §4.2.13), and a redirect
 * for FILE gains `Link: <…/FILE.asc>; rel=describedby; type="application/pgp-signature"`
 * (RFC 6249 §6), as MirrorBrain sends them.
 *
 * Which file has a signature is decided by `mb index` (`file.signature`,
 * src/lib/origin/signatures.ts) and read from the snapshot: a redirect for a file without
 * one costs a field test. The signature's text is read from disk once per signature
 * version, for meta4 documents only.
 */
import {readFile} from 'node:fs/promises'
import {sep} from 'node:path'
import type {FileEntry} from '../serve/snapshot/file-entry.js'

const PGP_SIGNATURE_MEDIA_TYPE = 'application/pgp-signature'

/** Signatures larger than this (bytes) are not put into documents. */
const MAX_SIGNATURE_BYTES = 64 * 1024

/** The snapshot entry of `file`'s signature (`FILE.asc`, else `FILE.sig`, smaller than FILE), or undefined. */
export function signatureOf(files: {get(path: string): FileEntry | undefined}, file: Pick<FileEntry, 'path' | 'size' | 'signature'>): FileEntry | undefined {
  return file.signature ? files.get(file.path + file.signature) : undefined
}

/** The RFC 6249 `Link` value pointing at a file's detached signature (its URL on this server). */
export function signatureLink(url: string): string {
  return `<${url}>; rel=describedby; type="${PGP_SIGNATURE_MEDIA_TYPE}"`
}

/**
 * The ASCII-armored text of signatures, read from the origin once per signature version
 * (path, size, mtime). A binary `.sig` has no text form for XML, and is left out.
 */
export class SignatureTexts {
  private readonly texts = new Map<string, {size: number; mtime: number; text: string | null}>()

  /** @param root the origin root (realpath) */
  constructor(private readonly root: () => string) {}

  /** The armored text of `signature`, or null (binary, too large, unreadable). */
  async text(signature: FileEntry): Promise<string | null> {
    const known = this.texts.get(signature.path)
    if (known && known.size === signature.size && known.mtime === signature.mtime) return known.text
    let text: string | null = null
    if (signature.size <= MAX_SIGNATURE_BYTES) {
      try {
        const content = (await readFile(this.root() + sep + signature.path, 'utf8')).trim()
        text = content.startsWith('-----BEGIN PGP SIGNATURE-----') && content.endsWith('-----END PGP SIGNATURE-----') ? content : null
      } catch {
        text = null
      }
    }
    if (this.texts.size >= 10_000) this.texts.clear()
    this.texts.set(signature.path, {size: signature.size, mtime: signature.mtime, text})
    return text
  }
}
