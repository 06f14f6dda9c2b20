import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import request from 'supertest';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { startTestProduct, type ProductHarness } from './gateway-kit';
import { logEntries } from './listener-kit';
import { createKey } from '../../support/keys';

/**
 * CONTRACT §2: a reload re-reads TLS_CERT_FILE and TLS_KEY_FILE. New handshakes get the new pair;
 * an HTTP/2 session and an HTTP/1.1 keep-alive connection opened before keep serving; a broken pair
 * is refused, the one in force kept, and both the log and the reload's answer say so.
 */
let first: TestCertificates;
let second: TestCertificates;
let dir: string;
let product: ProductHarness;
let ca: Buffer[];
const certFile = () => path.join(dir, 'tls.crt');
const keyFile = () => path.join(dir, 'tls.key');

/** As a Kubernetes secret update lands: new files renamed over the old ones. */
function install(cert: string, key: string): void {
  fs.copyFileSync(cert, `${certFile()}.new`);
  fs.copyFileSync(key, `${keyFile()}.new`);
  fs.renameSync(`${certFile()}.new`, certFile());
  fs.renameSync(`${keyFile()}.new`, keyFile());
}

const fingerprintOf = (certPath: string) => new X509Certificate(fs.readFileSync(certPath)).fingerprint256;

function h2Get(session: http2.ClientHttp2Session, auth: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': '/v1/pets', authorization: auth });
    stream.on('response', (headers) => resolve(headers[':status'] ?? 0));
    stream.on('error', reject);
    stream.resume();
  });
}

async function newSessionFingerprint(): Promise<string> {
  const session = http2.connect(product.gatewayUrl, { ca });
  try {
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    });
    return (session.socket as TLSSocket).getPeerCertificate().fingerprint256;
  } finally {
    session.close();
  }
}

beforeAll(async () => {
  first = makeTestCertificates();
  second = makeTestCertificates();
  ca = [fs.readFileSync(first.caCert), fs.readFileSync(second.caCert)];
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-tls-reload-'));
  install(first.serverCert, first.serverKey);
  product = await startTestProduct({ env: { TLS_CERT_FILE: certFile(), TLS_KEY_FILE: keyFile() } });
});
afterAll(async () => {
  await product.close();
});

it('a new pair serves new handshakes; the session and the keep-alive connection opened before keep working', async () => {
  const { auth } = await createKey(product, { plan: 'pro' });
  const session = http2.connect(product.gatewayUrl, { ca });
  let sessionClosed = false;
  session.on('close', () => (sessionClosed = true));
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca });
  const http1Sockets = new Set<unknown>();
  const http1Get = () =>
    new Promise<number>((resolve, reject) => {
      https
        .get(`${product.gatewayUrl}/v1/pets`, { agent, headers: { authorization: auth } }, (res) => {
          http1Sockets.add(res.socket);
          res.resume().on('end', () => resolve(res.statusCode ?? 0));
        })
        .on('error', reject);
    });
  try {
    expect(await h2Get(session, auth)).toBe(200);
    expect(await http1Get()).toBe(200);
    expect(await newSessionFingerprint()).toBe(fingerprintOf(first.serverCert));

    install(second.serverCert, second.serverKey);
    const res = await request(product.adminUrl)
      .post('/admin/reload')
      .set('Authorization', `Bearer ${product.adminToken}`)
      .expect(200);
    expect(res.body).toMatchObject({ result: 'success', restartNeeded: [] });

    expect(await newSessionFingerprint()).toBe(fingerprintOf(second.serverCert));
    expect(await h2Get(session, auth)).toBe(200);
    expect(await http1Get()).toBe(200);
    expect((session.socket as TLSSocket).getPeerCertificate().fingerprint256).toBe(fingerprintOf(first.serverCert));
    expect(sessionClosed).toBe(false);
    expect(http1Sockets.size).toBe(1);
    const line = logEntries(product).find((entry) => entry.msg === 'config reloaded');
    expect(line).toMatchObject({ certificate: { fingerprint: fingerprintOf(second.serverCert) } });
  } finally {
    session.close();
    agent.destroy();
  }
});

it('a broken pair is refused and the pair in force kept, in the answer and the log', async () => {
  install(first.serverCert, second.serverKey);
  const res = await request(product.adminUrl)
    .post('/admin/reload')
    .set('Authorization', `Bearer ${product.adminToken}`)
    .expect(400);
  expect(res.body).toMatchObject({
    code: 'invalid_config',
    status: 400,
    errors: [
      { setting: 'TLS_KEY_FILE (tls.keyFile)', message: expect.stringContaining('is not the key of the certificate') },
    ],
  });
  expect(await newSessionFingerprint()).toBe(fingerprintOf(second.serverCert));
  const line = logEntries(product).findLast(
    (entry) => entry.msg === 'config reload refused: the config in force is unchanged',
  );
  expect(line).toMatchObject({ errors: [{ setting: 'TLS_KEY_FILE (tls.keyFile)' }] });
});
