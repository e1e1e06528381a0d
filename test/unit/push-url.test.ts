import {expect} from 'chai'
import {UsageError} from '../../src/lib/errors.js'
import {normalizePushUrl} from '../../src/lib/mirrors/urls.js'
import {validateMirrorInput} from '../../src/lib/mirrors/validate.js'
import {isSshTarget} from '../../src/lib/scan/rsync.js'

function refused(text: string): string {
  try {
    normalizePushUrl(text)
  } catch (error) {
    expect(error).to.be.instanceOf(UsageError)
    expect((error as UsageError).exitCode).to.equal(2)
    return (error as UsageError).message
  }
  throw new Error(`${text} was accepted`)
}

describe('push_url validation', () => {
  it('accepts rsync daemon modules and ssh targets, normalised to end in /', () => {
    const cases: Array<[string, string]> = [
      ['rsync://mirror.example.org/pub', 'rsync://mirror.example.org/pub/'],
      ['rsync://up@mirror.example.org:8873/pub/os/', 'rsync://up@mirror.example.org:8873/pub/os/'],
      ['mirror.example.org::pub/os', 'rsync://mirror.example.org/pub/os/'],
      ['rsync://[2001:db8::1]:873/pub/', 'rsync://[2001:db8::1]:873/pub/'],
      ['mirror@mirror.example.org:/srv/pub', 'mirror@mirror.example.org:/srv/pub/'],
      ['mirror.example.org:pub/', 'mirror.example.org:pub/'],
      ['mirror@[2001:db8::2]:/srv/pub/', 'mirror@[2001:db8::2]:/srv/pub/'],
    ]
    for (const [input, stored] of cases) expect(normalizePushUrl(input), input).to.equal(stored)
  })

  it('refuses every shell metacharacter and whitespace, naming the character', () => {
    for (const [input, char] of [
      ['user@host:/srv/$(reboot)/', '"$" (U+0024)'],
      ['user@host:/srv/`id`/', '"`" (U+0060)'],
      ['rsync://host/mod/a;b/', '";" (U+003B)'],
      ['host:/srv/a|b', '"|" (U+007C)'],
      ['host:/srv/a&b', '"&" (U+0026)'],
      ['host:/srv/a>b', '">" (U+003E)'],
      ['host:/srv/*', '"*" (U+002A)'],
      ["host:/srv/'a'", '"\'" (U+0027)'],
      ['host:pub dir/', 'U+0020 (whitespace)'],
      ['host:~/pub/', '"~" (U+007E)'],
    ]) {
      expect(refused(input), input).to.include(`Invalid --push-url ${JSON.stringify(input)}: character ${char} is a shell metacharacter or whitespace`)
    }
  })

  it('refuses other malformed targets', () => {
    expect(refused('-oProxyCommand=x:/srv/')).to.match(/^Invalid --push-url "-oProxyCommand=x:\/srv\/": expected rsync:\/\/host\/module\/path\//)
    expect(refused('host:/srv/../etc/')).to.include("the path may not hold '..'")
    expect(refused('http://host/pub/')).to.include('expected rsync://host/module/path/, host::module/path/ or user@host:path/')
    expect(refused('rsync://host/')).to.include('an rsync URL names a module')
  })

  it('redacts a password in the message', () => {
    expect(refused('rsync://u:s3cret@host/mod/a;b/')).to.include('rsync://u:***@host/mod/a;b/').and.not.include('s3cret')
  })

  it('clears with an empty value, and checks --push-include globs', () => {
    expect(validateMirrorInput({push_url: '', push_include: ['']})).to.deep.equal({push_url: null, push_include: []})
    expect(validateMirrorInput({push_include: ['large/**', 'small/d7/**', 'large/**']})).to.deep.equal({push_include: ['large/**', 'small/d7/**']})
  })

  it('tells ssh targets from rsync URLs', () => {
    expect(['u@h:/srv/', 'h:pub/', 'u@[2001:db8::2]:/srv/'].map(isSshTarget)).to.deep.equal([true, true, true])
    expect(['rsync://h/m/', 'h::m/', 'rsync://u@h:873/m/'].map(isSshTarget)).to.deep.equal([false, false, false])
  })
})
