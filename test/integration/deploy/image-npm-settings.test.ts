import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { useTempDirs } from '../../support/temp-dirs';
import { repositoryRoot } from './chart-kit';

/**
 * Issue 52 part 5: the npm settings the image test's base image carries
 * (scripts/image-npm-settings.js, called by scripts/image-base.sh). On a fresh CI machine behind a
 * TLS-inspecting proxy the build's `npm ci` failed with SELF_SIGNED_CERT_IN_CHAIN: the script took
 * the CA from `npm config get cafile` alone, and with another Node first on PATH npm reads no
 * global config (its prefix is that Node's), so it said null and nothing was copied, while the
 * host's npm worked through NODE_EXTRA_CA_CERTS. Here a machine is laid out in a temp dir: its
 * "system" Node with a global npmrc naming the proxy's CA, another Node first on PATH, and
 * NODE_EXTRA_CA_CERTS naming a second CA.
 */

const { tempDir } = useTempDirs('asg-npm-settings-');
const helper = path.join(repositoryRoot, 'scripts', 'image-npm-settings.js');
// What a leaked credential would look like; it must appear in nothing the helper writes or prints.
const CREDENTIAL = 'npm_SeCrEt0123456789abcdef';

interface Machine {
  env: NodeJS.ProcessEnv;
  project: string;
  systemPrefix: string;
}

let certs: TestCertificates;
beforeAll(() => {
  certs = makeTestCertificates();
});
afterAll(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

/** Where this machine's npm is (after both Nodes on the machine's PATH: they run it). */
function npmDir(): string {
  const dir = (process.env.PATH ?? '').split(path.delimiter).find((d) => d && fs.existsSync(path.join(d, 'npm')));
  if (!dir) throw new Error('npm is not on PATH');
  return dir;
}

/** The machine: <system>/bin/node with <system>/etc/npmrc, and <other>/bin/node first on PATH. */
function layOutMachine(): Machine {
  const root = tempDir();
  const systemPrefix = path.join(root, 'system');
  const otherPrefix = path.join(root, 'other');
  for (const prefix of [systemPrefix, otherPrefix]) {
    fs.mkdirSync(path.join(prefix, 'bin'), { recursive: true });
    fs.symlinkSync(process.execPath, path.join(prefix, 'bin', 'node'));
  }
  fs.mkdirSync(path.join(systemPrefix, 'etc'));
  fs.writeFileSync(
    path.join(systemPrefix, 'etc', 'npmrc'),
    [`cafile=${certs.caCert}`, 'registry=https://registry.mirror.example/', 'strict-ssl=false', `//registry.mirror.example/:_authToken=${CREDENTIAL}`, ''].join('\n'),
  );
  const home = path.join(root, 'home');
  const project = path.join(root, 'project');
  fs.mkdirSync(home);
  fs.mkdirSync(project);
  return {
    project,
    systemPrefix,
    env: { PATH: [path.join(otherPrefix, 'bin'), path.join(systemPrefix, 'bin'), npmDir(), '/usr/bin', '/bin'].join(':'), HOME: home, NODE_EXTRA_CA_CERTS: certs.otherCaCert },
  };
}

function runHelper(machine: Machine): { out: string; stdout: string; pem: string; npmrc: string; fingerprint: string } {
  const out = tempDir();
  const run = spawnSync(process.execPath, [helper, out, machine.project], { encoding: 'utf8', env: machine.env });
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  const fingerprint = /^fingerprint ([0-9a-f]{64})$/m.exec(run.stdout)?.[1] ?? '';
  return { out, stdout: run.stdout, pem: fs.readFileSync(path.join(out, 'ca.pem'), 'utf8'), npmrc: fs.readFileSync(path.join(out, 'npmrc'), 'utf8'), fingerprint };
}

/** A certificate file's body, as one base64 line: how bundles are compared whatever their line width. */
function bodyOf(pem: string): string {
  return pem.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s+/g, '');
}
function bodiesIn(bundle: string): string[] {
  return (bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(bodyOf);
}

describe('the base image\'s npm settings (scripts/image-npm-settings.js)', () => {
  it('the premise: with another Node first on PATH, `npm config get cafile` says null, so the old script copied no CA', () => {
    const machine = layOutMachine();
    const npm = spawnSync('npm', ['config', 'get', 'cafile'], { encoding: 'utf8', env: machine.env, cwd: machine.project });
    expect({ status: npm.status, cafile: npm.stdout.trim() }).toEqual({ status: 0, cafile: 'null' });
  });

  it('bundles the cafile of every npm on the machine, NODE_EXTRA_CA_CERTS and Node\'s own roots, with another Node first on PATH', () => {
    const machine = layOutMachine();
    const { pem, stdout } = runHelper(machine);
    const bundle = new Set(bodiesIn(pem));
    const expected = {
      proxyCaFromTheSystemNpmrc: bodiesIn(fs.readFileSync(certs.caCert, 'utf8')).every((b) => bundle.has(b)),
      nodeExtraCaCerts: bodiesIn(fs.readFileSync(certs.otherCaCert, 'utf8')).every((b) => bundle.has(b)),
      nodeRoots: tls.rootCertificates.every((root) => bundle.has(bodyOf(root))),
    };
    expect(expected).toEqual({ proxyCaFromTheSystemNpmrc: true, nodeExtraCaCerts: true, nodeRoots: true });
    expect(bodiesIn(pem).length).toBe(bundle.size); // each certificate once
    expect(stdout).toContain(`cafile in global npmrc of ${path.join(machine.systemPrefix, 'bin', 'node')}`);
    expect(stdout).toContain(`NODE_EXTRA_CA_CERTS ${certs.otherCaCert}`);
  });

  it('names the bundle as npm\'s cafile and carries the registry and strict-ssl, never a credential', () => {
    const machine = layOutMachine();
    const { out, stdout, npmrc } = runHelper(machine);
    expect(npmrc).toBe('registry=https://registry.mirror.example/\ncafile=/usr/local/etc/npm-build-ca.pem\nstrict-ssl=false\n');
    for (const file of fs.readdirSync(out)) expect({ file, leaked: fs.readFileSync(path.join(out, file), 'utf8').includes(CREDENTIAL) }).toEqual({ file, leaked: false });
    expect(stdout.includes(CREDENTIAL)).toBe(false);
  });

  it('gives the same fingerprint for the same CAs and another when a CA changes (the base image is made again)', () => {
    const machine = layOutMachine();
    // NODE_EXTRA_CA_CERTS names one path; what it holds changes (a proxy's CA renewed).
    const extra = path.join(tempDir(), 'extra-ca.crt');
    fs.copyFileSync(certs.otherCaCert, extra);
    const withExtra = { ...machine, env: { ...machine.env, NODE_EXTRA_CA_CERTS: extra } };
    const first = runHelper(withExtra).fingerprint;
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(runHelper(withExtra).fingerprint).toBe(first);
    fs.copyFileSync(certs.serverCert, extra);
    const changed = runHelper(withExtra);
    expect(changed.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(changed.fingerprint).not.toBe(first);
    expect(new Set(bodiesIn(changed.pem)).has(bodyOf(fs.readFileSync(certs.serverCert, 'utf8')))).toBe(true);
  });
});
