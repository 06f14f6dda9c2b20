import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeTestCertificates } from '../../support/tls-certs';
import { startTestProduct, type ProductHarness } from './gateway-kit';

/**
 * Checked by a tool nobody here wrote: Debian's testssl.sh (command `testssl`, package
 * testssl.sh) scans the running HTTPS listener on loopback (protocols, ciphers, forward secrecy,
 * certificate, known vulnerabilities) through scripts/testssl-scan.sh, and no finding is HIGH or
 * CRITICAL. The certificate is made as a real one is (90 days, a CRL URI) so that its own checks
 * count too; the test CA is handed to testssl with --add-ca. About 40 s.
 */
jest.setTimeout(180_000);

let product: ProductHarness;
beforeAll(async () => {
  const certs = makeTestCertificates({ validDays: 90, serverExtensions: 'crlDistributionPoints=URI:http://crl.animalstore.example/ca.crl\n' });
  product = await startTestProduct({ env: { TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.serverKey } });
  caFile = certs.caCert;
});
afterAll(async () => {
  await product.close();
});
let caFile: string;

interface Finding {
  id: string;
  severity: string;
  finding: string;
}

test('testssl.sh finds nothing HIGH or CRITICAL on the HTTPS listener', async () => {
  const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-testssl-')), 'testssl.json');
  // Asynchronous: the listener under scan runs in this process.
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile('sh', ['scripts/testssl-scan.sh', new URL(product.gatewayUrl).host, report, caFile], { timeout: 170_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
  process.stdout.write(run.stdout);
  expect(run.stderr).not.toMatch(/testssl is not on PATH/);
  const findings = JSON.parse(fs.readFileSync(report, 'utf8')) as Finding[];
  // The scan ran through: it reached the listener and tested protocols and vulnerabilities.
  expect(findings.find((f) => f.id === 'scanProblem')).toBeUndefined();
  expect(findings.find((f) => f.id === 'TLS1_3')?.severity).toBe('OK');
  expect(findings.find((f) => f.id === 'TLS1')?.finding).toMatch(/not offered/);
  expect(findings.find((f) => f.id === 'SSLv3')?.finding).toMatch(/not offered/);
  expect(findings.find((f) => f.id === 'heartbleed')?.severity).toBe('OK');
  expect(findings.filter((f) => f.severity === 'HIGH' || f.severity === 'CRITICAL')).toEqual([]);
  expect(run.code).toBe(0);
});
