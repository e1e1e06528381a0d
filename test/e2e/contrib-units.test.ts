// @store-independent: the systemd units (no store)
/**
 * The systemd units and timers in contrib/systemd pass `systemd-analyze verify` (Debian's
 * `systemd` package; no running systemd needed), and they hold the settings an operator
 * relies on: the unprivileged user, the hardening, reload by SIGHUP, the file limit, the
 * listening socket held by mb-serve.socket, and a randomized delay on every timer.
 *
 * verify checks that each ExecStart binary exists, so the units are checked in a copy whose
 * `/usr/bin/mb` points at a stub script in a temp directory; nothing else is changed.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {requireBinary} from '../helpers/cli.js'

const UNITS = new URL('../../contrib/systemd/', import.meta.url).pathname

function unit(name: string): string {
  return readFileSync(join(UNITS, name), 'utf8')
}

describe('contrib/systemd units', () => {
  it('pass systemd-analyze verify', function () {
    requireBinary(this, 'systemd-analyze', 'systemd')
    const dir = mkdtempSync(join(tmpdir(), 'mb-units-'))
    try {
      const stub = join(dir, 'mb')
      writeFileSync(stub, '#!/bin/sh\nexit 0\n')
      chmodSync(stub, 0o755)
      const names = readdirSync(UNITS).sort()
      expect(names).to.deep.equal([
        'mb-alert@.service',
        'mb-index.service',
        'mb-index.timer',
        'mb-probe.service',
        'mb-probe.timer',
        'mb-scan.service',
        'mb-scan.timer',
        'mb-serve.service',
        'mb-serve.socket',
      ])
      for (const name of names) writeFileSync(join(dir, name), unit(name).replaceAll('/usr/bin/mb ', `${stub} `))
      const r = spawnSync('systemd-analyze', ['verify', '--man=no', '--generators=no', ...names.map((n) => join(dir, n))], {encoding: 'utf8', timeout: 60_000})
      expect(r.stderr + r.stdout).to.equal('')
      expect(r.status).to.equal(0)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  it('run mb serve unprivileged and hardened, reloading on SIGHUP', () => {
    const serve = unit('mb-serve.service')
    for (const line of [
      'User=mb',
      'Type=simple',
      'ExecStart=/usr/bin/mb serve --access-log /var/log/mb/access.log',
      'ExecReload=/bin/kill -HUP $MAINPID',
      'LimitNOFILE=65536',
      'ProtectSystem=strict',
      'ProtectHome=true',
      'PrivateTmp=true',
      'NoNewPrivileges=true',
      'ReadWritePaths=/var/lib/mb /var/log/mb',
    ])
      expect(serve.split('\n'), line).to.include(line)
  })

  it('give mb serve its listening socket from mb-serve.socket, which outlives restarts of the service', () => {
    const socket = unit('mb-serve.socket').split('\n')
    for (const line of ['ListenStream=127.0.0.1:8080', 'Accept=no', 'WantedBy=sockets.target']) expect(socket, line).to.include(line)
    const serve = unit('mb-serve.service').split('\n')
    for (const line of ['Requires=mb-serve.socket', 'Also=mb-serve.socket']) expect(serve, line).to.include(line)
    expect(serve.find((l) => l.startsWith('After='))).to.include('mb-serve.socket')
  })

  it('alert on a failed probe round: mb-probe.service fails on it and names mb-alert@.service in OnFailure=, which logs', () => {
    const probe = unit('mb-probe.service').split('\n')
    expect(probe).to.include('OnFailure=mb-alert@%n.service')
    const alert = unit('mb-alert@.service')
    expect(alert).to.match(/^Type=oneshot$/m)
    expect(alert).to.match(/^ExecStart=.*journalctl --unit=%i .*systemd-cat --identifier=mb-alert --priority=warning'$/m)
  })

  it('start index, scan and probe from timers with randomized delays, quietly', () => {
    for (const [name, args] of [
      ['index', 'index --hashes'],
      ['scan', 'scan --all'],
      ['probe', 'probe --all --quiet --fail-on-down'],
    ]) {
      const service = unit(`mb-${name}.service`).split('\n')
      expect(service).to.include(`ExecStart=/usr/bin/mb ${args}${args.includes('--quiet') ? '' : ' --quiet'}`)
      expect(service).to.include('Type=oneshot')
      expect(service).to.include('User=mb')
      const timer = unit(`mb-${name}.timer`)
      expect(timer).to.match(/^RandomizedDelaySec=\S+$/m)
      expect(timer).to.match(/^(OnCalendar|OnUnitActiveSec)=\S+$/m)
      expect(timer).to.match(/^WantedBy=timers\.target$/m)
    }
  })
})
