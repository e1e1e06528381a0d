/**
 * Running a scan lister to the end in tests: every entry and every warning it gave, or the
 * MbError it failed with.
 */
import {expect} from 'chai'
import {MbError} from '../../src/lib/errors.js'
import type {ListOptions, ListingEntry, Lister} from '../../src/lib/scan/types.js'

/** Lists `url` with the lister `create` builds around a warning sink; collects both. */
export async function collectListing(create: (onWarning: (message: string) => void) => Lister, url: string, listOptions: ListOptions = {}): Promise<{entries: ListingEntry[]; warnings: string[]}> {
  const warnings: string[] = []
  const lister = create((m) => warnings.push(m))
  const entries: ListingEntry[] = []
  for await (const e of lister.list(url, listOptions)) entries.push(e)
  return {entries, warnings}
}

/** The MbError `promise` rejects with; fails the test when it resolves or throws anything else. */
export async function listingFailure(promise: Promise<unknown>): Promise<MbError> {
  try {
    await promise
  } catch (error) {
    expect(error).to.be.instanceOf(MbError)
    return error as MbError
  }
  throw new Error('expected the listing to fail')
}
