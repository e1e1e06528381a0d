import {expect} from 'chai'
import {redact} from '../../src/lib/redact.js'

describe('redact', () => {
  it('replaces the password in a URL and leaves the rest', () => {
    expect(redact('rsync://u:secret@h.example/pub/')).to.equal('rsync://u:***@h.example/pub/')
    expect(redact('ftp://anonymous:me@example.org@h.example/')).to.equal('ftp://anonymous:***@h.example/')
    expect(redact('ftp://u:p@h/x')).to.equal('ftp://u:***@h/x')
    expect(redact('postgres://mb:hunter2@db.example:5432/mb')).to.equal('postgres://mb:***@db.example:5432/mb')
    expect(redact('//u:p@h/x')).to.equal('//u:***@h/x')
    expect(redact('ftp://u:@h/x')).to.equal('ftp://u:@h/x')
  })

  it('leaves text without credentials unchanged', () => {
    expect(redact('http://h.example:8080/x@y')).to.equal('http://h.example:8080/x@y')
    expect(redact('rsync://u@h.example/pub/')).to.equal('rsync://u@h.example/pub/')
    expect(redact('http://h.example/a:b@c')).to.equal('http://h.example/a:b@c')
    expect(redact('http://h.example/?page=2&sort=name')).to.equal('http://h.example/?page=2&sort=name')
    expect(redact('/var/lib/mb')).to.equal('/var/lib/mb')
  })

  it('redacts URLs inside free text, and the rsync daemon form', () => {
    expect(redact('scan failed for ftp://u:secret@h.example/pub/: 530')).to.equal('scan failed for ftp://u:***@h.example/pub/: 530')
    expect(redact('failed rsync://alice:s3cret@host/m/ here')).to.equal('failed rsync://alice:***@host/m/ here')
    expect(redact('u:secret@h.example::pub')).to.equal('u:***@h.example::pub')
    expect(redact('rsync "u:secret@h.example::pub" failed')).to.equal('rsync "u:***@h.example::pub" failed')
  })

  it('redacts password-like query parameters', () => {
    expect(redact('https://h.example/pub/?token=abc123&page=2')).to.equal('https://h.example/pub/?token=***&page=2')
    expect(redact('https://h.example/x?a=1&Password=pw#top')).to.equal('https://h.example/x?a=1&Password=***#top')
    expect(redact('https://h.example/x?api_key=k&sig=s')).to.equal('https://h.example/x?api_key=***&sig=***')
  })

  it('redacts every occurrence of the given secrets', () => {
    expect(redact('password s3cret rejected', ['s3cret'])).to.equal('password *** rejected')
    expect(redact('s3cret and s3cret', ['s3cret', ''])).to.equal('*** and ***')
  })
})
