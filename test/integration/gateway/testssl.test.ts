import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { makeTestCertificates } from '../../support/tls-certs';
import { startTestProduct, type ProductHarness } from './gateway-kit';

/**
 * Checked by a tool nobody here wrote: Debian's testssl.sh (command `testssl`, package
 * testssl.sh) scans the running HTTPS listener on loopback (protocols, ciphers, forward secrecy,
 * certificate, known vulnerabilities) through scripts/testssl-scan.sh, and no finding is HIGH or
 * CRITICAL. The certificate is made as a real one is (90 days, a CRL URI) so that its own checks
 * count too; the test CA is handed to testssl with --add-ca.
 *
 * No wall clock on the scan: what it scans bounds it (the checks in scripts/testssl-scan.sh), and
 * a clock a crowded machine overran once killed testssl mid-report (about 40 s quiet, 166 s at load
 * average 12). The test's timeout is a hang guard only; a report testssl did not finish is failed
 * as incomplete, never parsed as a scan.
 */
jest.setTimeout(600_000);

let product: ProductHarness;
beforeAll(async () => {
  const certs = makeTestCertificates({
    validDays: 90,
    serverExtensions: 'crlDistributionPoints=URI:http://crl.animalstore.example/ca.crl\n',
  });
  product = await startTestProduct({ env: { TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.serverKey } });
  caFile = certs.caCert;
});
let scan: ChildProcess | undefined;
afterAll(async () => {
  // The hang guard fired: the scan must not outlive the test (nor scan a listener being closed).
  if (scan && scan.exitCode === null) scan.kill('SIGKILL');
  await product.close();
});
let caFile: string;

/** TLS 1.2 suites whose key exchange is RSA key transport (no forward secrecy): what ROBOT needs. */
const RSA_KEY_TRANSPORT = 'AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA256:AES256-SHA256:AES128-SHA:AES256-SHA';

interface Finding {
  id: string;
  severity: string;
  finding: string;
}

test('testssl.sh finds nothing HIGH or CRITICAL on the HTTPS listener', async () => {
  const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-testssl-')), 'testssl.json');
  // Asynchronous: the listener under scan runs in this process.
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    scan = execFile(
      'sh',
      ['scripts/testssl-scan.sh', new URL(product.gatewayUrl).host, report, caFile],
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
  process.stdout.write(run.stdout);
  expect(run.stderr).not.toMatch(/testssl is not on PATH/);
  // The script's exit 3: testssl did not finish its report (it ends with the scanTime entry).
  expect({ code: run.code, stderr: run.stderr }).not.toMatchObject({ code: 3 });
  const findings = JSON.parse(fs.readFileSync(report, 'utf8')) as Finding[];
  expect(findings.at(-1)?.id).toBe('scanTime');
  // The scan ran through: it reached the listener and tested protocols and vulnerabilities.
  expect(findings.find((f) => f.id === 'scanProblem')).toBeUndefined();
  expect(findings.find((f) => f.id === 'TLS1_3')?.severity).toBe('OK');
  expect(findings.find((f) => f.id === 'TLS1')?.finding).toMatch(/not offered/);
  expect(findings.find((f) => f.id === 'SSLv3')?.finding).toMatch(/not offered/);
  expect(findings.find((f) => f.id === 'heartbleed')?.severity).toBe('OK');
  // Refused at the first attempt (no renegotiation at all), not "mitigated" by Node's cap of 3: a
  // verdict on the cap depended on how fast a crowded machine answered testssl's fourth attempt.
  expect(findings.find((f) => f.id === 'secure_client_renego')).toMatchObject({
    severity: 'OK',
    finding: 'not vulnerable',
  });
  // Every check the script names ran (scripts/testssl-scan.sh: the ones that can apply to this listener).
  expect(findings.find((f) => f.id === 'PFS')?.severity).toBe('OK');
  for (const id of [
    'CCS',
    'secure_renego',
    'CRIME_TLS',
    'BREACH',
    'POODLE_SSL',
    'fallback_SCSV',
    'SWEET32',
    'FREAK',
    'DROWN',
    'LOGJAM',
    'BEAST',
    'LUCKY13',
    'RC4',
  ]) {
    expect({ id, found: findings.some((f) => f.id === id) }).toEqual({ id, found: true });
  }
  expect(findings.filter((f) => f.severity === 'HIGH' || f.severity === 'CRITICAL')).toEqual([]);
  expect({ code: run.code, stderr: run.stderr }).toMatchObject({ code: 0 });
});

test('a report testssl did not finish (killed mid-write) is failed as incomplete, never read as a clean scan', async () => {
  // A stand-in for testssl on PATH that writes half a report, as a killed testssl leaves it, and dies.
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-fake-testssl-'));
  fs.writeFileSync(
    path.join(bin, 'testssl'),
    '#!/bin/sh\nwhile [ "$1" != --jsonfile ]; do shift; done\nprintf \'[{"id":"TLS1_3","severity":"OK","finding":"offered"},\\n{"id":"heartbleed", "sev\' > "$2"\nexit 143\n',
    { mode: 0o755 },
  );
  const report = path.join(bin, 'report.json');
  const run = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(
      'sh',
      ['scripts/testssl-scan.sh', '127.0.0.1:1', report],
      { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } },
      (err, _stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
  expect(run.code).toBe(3);
  expect(run.stderr).toMatch(/the report .* is incomplete \(testssl exit 143\)/);
});

test('a client cannot renegotiate TLS 1.2 on the listener', async () => {
  const { hostname: host, port } = new URL(product.gatewayUrl);
  const socket = tls.connect({
    host,
    port: Number(port),
    ca: fs.readFileSync(caFile),
    servername: 'localhost',
    maxVersion: 'TLSv1.2',
  });
  try {
    await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    const refused = await new Promise<string>((resolve) => {
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      socket.renegotiate({}, (err) => err && resolve((err as NodeJS.ErrnoException).code ?? err.message));
    });
    expect(refused).toMatch(/NO_RENEGOTIATION/);
  } finally {
    socket.destroy();
  }
});

test('no RSA key transport is offered, so ROBOT (left out of the scan) cannot apply', async () => {
  // ROBOT is a padding oracle in RSA key exchange; testssl's check for it costs about 35 s on this
  // machine and answers "no RSA key transport cipher". One handshake offering only those suites says the same.
  const { hostname: host, port } = new URL(product.gatewayUrl);
  const outcome = await new Promise<string>((resolve) => {
    const socket = tls.connect({
      host,
      port: Number(port),
      ca: fs.readFileSync(caFile),
      servername: 'localhost',
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: RSA_KEY_TRANSPORT,
    });
    socket.once('secureConnect', () => {
      resolve(`connected with ${socket.getCipher().name}`);
      socket.destroy();
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  expect(outcome).toMatch(/HANDSHAKE_FAILURE/);
  // The same client with a suite the listener offers connects: the refusal above is the cipher's.
  const offered = await new Promise<string>((resolve) => {
    const socket = tls.connect({
      host,
      port: Number(port),
      ca: fs.readFileSync(caFile),
      servername: 'localhost',
      maxVersion: 'TLSv1.2',
      ciphers: 'ECDHE-RSA-AES128-GCM-SHA256',
    });
    socket.once('secureConnect', () => {
      resolve(socket.getCipher().name);
      socket.destroy();
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  expect(offered).toBe('ECDHE-RSA-AES128-GCM-SHA256');
});
