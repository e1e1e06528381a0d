import {expect} from 'chai'
import {type LinkTarget, resolveLinks} from '../../src/lib/origin/links.js'

describe('origin links: resolving a path through symlinks', () => {
  const links = new Map<string, LinkTarget>([
    ['war-stable/latest', {target: 'war-stable/2.249.1', directory: true}],
    ['war-stable/latest.war', {target: 'war-stable/2.249.1/jenkins.war', directory: false}],
    ['current', {target: 'war-stable/2.249.1', directory: true}],
    ['war-stable/2.249.1/docs', {target: 'shared/docs', directory: true}],
    ['a', {target: 'b', directory: true}],
    ['b', {target: 'a', directory: true}],
  ])
  it('replaces a directory link on the path by its target', () => {
    expect(resolveLinks(links, 'war-stable/latest/jenkins.war')).to.equal('war-stable/2.249.1/jenkins.war')
    expect(resolveLinks(links, 'war-stable/latest')).to.equal('war-stable/2.249.1')
    expect(resolveLinks(links, 'current/jenkins.war')).to.equal('war-stable/2.249.1/jenkins.war')
  })
  it('replaces a file link only as the whole path', () => {
    expect(resolveLinks(links, 'war-stable/latest.war')).to.equal('war-stable/2.249.1/jenkins.war')
    expect(resolveLinks(links, 'war-stable/latest.war/x')).to.equal(undefined)
  })
  it('follows a link found inside a target, left to right', () => {
    expect(resolveLinks(links, 'war-stable/latest/docs/index.html')).to.equal('shared/docs/index.html')
  })
  it('is undefined without a link on the path, and for a loop', () => {
    expect(resolveLinks(links, 'war-stable/2.249.1/jenkins.war')).to.equal(undefined)
    expect(resolveLinks(links, 'war-stable/latest-not/x')).to.equal(undefined)
    expect(resolveLinks(links, 'a/x')).to.equal(undefined)
    expect(resolveLinks(new Map(), 'x')).to.equal(undefined)
  })
})
