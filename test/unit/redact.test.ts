import {expect} from 'chai'
import {redact} from '../../src/lib/redact.js'

/** [input, expected] pairs, by what they show. */
const CASES: Record<string, Array<[string, string]>> = {
  'replaces the password in a URL and keeps the user': [
    ['rsync://u:secret@h.example/pub/', 'rsync://u:***@h.example/pub/'],
    ['ftp://anonymous:me@example.org@h.example/', 'ftp://anonymous:***@h.example/'],
    ['ftp://u:p@h/x', 'ftp://u:***@h/x'],
    ['postgres://mb:hunter2@db.example:5432/mb', 'postgres://mb:***@db.example:5432/mb'],
    ['//u:p@h/x', '//u:***@h/x'],
    ['ftp://u:@h/x', 'ftp://u:@h/x'],
  ],
  'leaves text without credentials unchanged': [
    ['http://h.example:8080/x@y', 'http://h.example:8080/x@y'],
    ['rsync://u@h.example/pub/', 'rsync://u@h.example/pub/'],
    ['http://h.example/a:b@c', 'http://h.example/a:b@c'],
    ['http://h.example/?page=2&sort=name', 'http://h.example/?page=2&sort=name'],
    ['/var/lib/mb', '/var/lib/mb'],
  ],
  'redacts URLs inside free text, and the rsync daemon form': [
    ['scan failed for ftp://u:secret@h.example/pub/: 530', 'scan failed for ftp://u:***@h.example/pub/: 530'],
    ['failed rsync://alice:s3cret@host/m/ here', 'failed rsync://alice:***@host/m/ here'],
    ['u:secret@h.example::pub', 'u:***@h.example::pub'],
    ['rsync "u:secret@h.example::pub" failed', 'rsync "u:***@h.example::pub" failed'],
  ],
  'redacts password-like query parameters': [
    ['https://h.example/pub/?token=abc123&page=2', 'https://h.example/pub/?token=***&page=2'],
    ['https://h.example/x?a=1&Password=pw#top', 'https://h.example/x?a=1&Password=***#top'],
    ['https://h.example/x?api_key=k&sig=s', 'https://h.example/x?api_key=***&sig=***'],
  ],
}

describe('redact', () => {
  for (const [title, cases] of Object.entries(CASES)) {
    it(title, () => {
      for (const [input, expected] of cases) expect(redact(input), input).to.equal(expected)
    })
  }

  it('redacts every occurrence of the given secrets', () => {
    expect(redact('password s3cret rejected', ['s3cret'])).to.equal('password *** rejected')
    expect(redact('s3cret and s3cret', ['s3cret', ''])).to.equal('*** and ***')
  })
})
