/**
 * Settings and inputs an attack run got accepted silently (issue 36 item 10): each is now
 * refused with an error that names the setting and says what to do. (An invalid rule `--path`
 * glob: test/unit/rules.test.ts.)
 */
import {expect} from 'chai'
import {loadConfig} from '../../src/lib/config/index.js'
import {globProblem, originGlobProblem} from '../../src/lib/glob.js'
import {normalizePatterns, validateIdentifier} from '../../src/lib/mirrors/validate.js'
import {isBroadPrefix} from '../../src/lib/net.js'

const load = (flags: Record<string, unknown>, env: Record<string, string> = {}) => loadConfig({env: {MB_CONFIG: 'none', ...env}, flags})

describe('attack-run refusals', () => {
  describe('trusted networks as broad as a refused mirror prefix', () => {
    it('refuses 0.0.0.0/0, ::/0 and anything shorter than /16 or /32 in trusted_proxies, naming the way out', () => {
      for (const cidr of ['0.0.0.0/0', '::/0', '8.0.0.0/8', '2001::/16', '0.0.0.0/4']) {
        expect(() => load({trusted_proxies: [cidr]}), cidr).to.throw(
          /--trusted-proxy \(setting trusted_proxies\.0\): .* is shorter than \/16 \(IPv4\) or \/32 \(IPv6\) and public.*X-Forwarded-For.*serve\.allow_broad_trusted_proxies: true/,
        )
      }
      // A proxy fleet in a range the Internet does not route is a common setup: no outside client sends from it.
      expect(load({trusted_proxies: ['10.0.0.0/8', '172.16.0.0/12', 'fc00::/7', '127.0.0.0/8']}).config.trusted_proxies).to.have.length(4)
      expect(() => load({'serve.country_query_clients': ['10.0.0.0/8']})).to.throw(/10\.0\.0\.0\/8 is shorter/)
      expect(() => load({}, {MB_TRUSTED_PROXIES: '127.0.0.1/32,0.0.0.0/0'})).to.throw(/MB_TRUSTED_PROXIES \(setting trusted_proxies\.1\): 0\.0\.0\.0\/0/)
      expect(load({trusted_proxies: ['10.1.0.0/16', '2001:db8::/32', '127.0.0.1']}).config.trusted_proxies).to.deep.equal(['10.1.0.0/16', '2001:db8::/32', '127.0.0.1/32'])
    })

    it('refuses the same in serve.country_query_clients', () => {
      expect(() => load({'serve.country_query_clients': ['0.0.0.0/0']})).to.throw(/serve\.country_query_clients\.0.*0\.0\.0\.0\/0 is shorter.*\?country=.*allow_broad_trusted_proxies/)
    })

    it('accepts them with serve.allow_broad_trusted_proxies: true', () => {
      const {config} = load({trusted_proxies: ['0.0.0.0/0', '::/0'], 'serve.country_query_clients': ['0.0.0.0/0'], 'serve.allow_broad_trusted_proxies': true})
      expect(config.trusted_proxies).to.deep.equal(['0.0.0.0/0', '::/0'])
      expect(config.serve.country_query_clients).to.deep.equal(['0.0.0.0/0'])
    })

    it('uses the rule of broad mirror prefixes', () => {
      expect(isBroadPrefix('1.2.0.0/15')).to.equal(true)
      expect(isBroadPrefix('1.2.0.0/16')).to.equal(false)
      expect(isBroadPrefix('2001:db8::/31')).to.equal(true)
      expect(isBroadPrefix('2001:db8::/32')).to.equal(false)
    })
  })

  it('accepts only http(s) and udp torrent trackers', () => {
    for (const bad of ['javascript:alert(1)', 'file:///etc/passwd', 'data:text/plain,x', 'ftp://t.example/announce', 'udp://', 'not a url']) {
      expect(() => load({'torrent.trackers': [bad]}), bad).to.throw(/torrent\.trackers\.0.*expected an http:\/\/, https:\/\/ or udp:\/\/ tracker announce URL/)
    }
    const good = ['udp://tracker.example.org:6969/announce', 'https://t.example/announce', 'http://t.example:8080/announce']
    expect(load({'torrent.trackers': good}).config.torrent.trackers).to.deep.equal(good)
  })

  it('refuses yum repository paths that leave the origin tree, also through $arch or $repo', () => {
    const repo = (path: string, arch: string[] = ['x86_64'], name = 'fedora-42') => load({yum: {repos: [{repo: name, arch, path}]}})
    expect(() => repo('/etc')).to.throw(/yum\.repos\.0\.path.*"\/etc" is not a directory inside the origin tree: an absolute path/)
    expect(() => repo('fedora/../../etc')).to.throw(/yum\.repos\.0\.path.*a "\.\." segment would leave the origin tree/)
    expect(() => repo('..')).to.throw(/"\.\." segment/)
    expect(() => repo('fedora/$arch/os', ['../../etc'])).to.throw(/"fedora\/\.\.\/\.\.\/etc\/os" is not a directory inside the origin tree/)
    expect(() => repo('$repo/os', ['x86_64'], '/abs')).to.throw(/an absolute path/)
    expect(repo('fedora/releases/42/Everything/$arch/os', ['x86_64', 'aarch64']).config.yum.repos[0].path).to.equal('fedora/releases/42/Everything/$arch/os')
    expect(repo('a..b/..c/os').config.yum.repos).to.have.length(1)
  })

  it('refuses a mirror name with surrounding whitespace instead of trimming it', () => {
    for (const name of ['m1\n', ' m1', 'm1 ', '\tm1']) expect(() => validateIdentifier(name), JSON.stringify(name)).to.throw(/Invalid NAME .*is not allowed/)
    expect(validateIdentifier('m1')).to.equal('m1')
  })

  describe('glob patterns', () => {
    it('finds unclosed brackets, braces and parentheses, and nothing wrong in ordinary globs', () => {
      for (const bad of ['[', 'a[b', '*.{iso', '?(a', 'a)', '}', 'x\\']) expect(globProblem(bad), bad).to.be.a('string')
      for (const good of ['*.iso', 'debug/**', '**', '*.{iso,img}', '[!a]*', '[]]', '[[:alpha:]]*', 'a\\[b', 'foo(1).iso', '@(a|b)/**']) expect(globProblem(good), good).to.equal(undefined)
    })

    it('refuses an invalid --include, --exclude or --push-include of a mirror', () => {
      expect(() => normalizePatterns('include_patterns', ['['])).to.throw(/Invalid --include "\[": not a valid glob pattern: a "\[" is not closed by "\]" \(write \\\[ for a literal bracket\)/)
      expect(() => normalizePatterns('exclude_patterns', ['*.iso', '*.{iso'])).to.throw(/Invalid --exclude "\*\.\{iso": not a valid glob pattern: a "\{" is not closed/)
      expect(normalizePatterns('push_include', ['*.iso', 'a\\[1\\]'])).to.deep.equal(['*.iso', 'a\\[1\\]'])
    })

    it('says which glob to write for one with a leading slash, "**" for "/" (the empty glob it would suggest is refused)', () => {
      expect(originGlobProblem('/archive/**')).to.equal('origin paths have no leading slash: write "archive/**"')
      expect(originGlobProblem('/')).to.equal('origin paths have no leading slash: write "**"')
      expect(originGlobProblem('//')).to.equal('origin paths have no leading slash: write "**"')
      expect(originGlobProblem('**')).to.equal(undefined)
    })

    it('refuses an invalid scan.include or scan.exclude', () => {
      expect(() => load({'scan.include': ['[']})).to.throw(/scan\.include\.0.*not a valid glob: a "\[" is not closed/)
      expect(() => load({'scan.exclude': ['**/*.{iso']})).to.throw(/scan\.exclude\.0.*not a valid glob/)
      expect(load({'scan.include': ['pub/**']}).config.scan.include).to.deep.equal(['pub/**'])
    })
  })
})
