import http2 from 'node:http2';
import fs from 'node:fs';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { TlsClient } from '../../support/tls-client';
import { createKey, startTestProduct, type ProductHarness } from './gateway-kit';

/**
 * CVE-2023-44487 ("rapid reset"): a client opens streams and resets them at once, in a loop, so the
 * server starts work for requests nobody waits for. Node (nghttp2 ≥ 1.57) bounds it; this shows it
 * on our listener: while one session resets streams as fast as it can (bounded in count and time,
 * loopback only), another client's requests keep their latency.
 */
const ATTACK_MS = 2000;
const ATTACK_STREAMS = 20_000;

let certs: TestCertificates;
let product: ProductHarness;
beforeAll(async () => {
  certs = makeTestCertificates();
  product = await startTestProduct({ env: { TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.serverKey } });
});
afterAll(async () => {
  await product.close();
});

async function latenciesMs(client: TlsClient, auth: string, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = process.hrtime.bigint();
    const res = await client.request({ path: '/v1/pets', headers: { authorization: auth } });
    expect(res.status).toBe(200);
    out.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return out;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Opens and cancels streams on one session until it is closed, the count or the time runs out. */
async function rapidReset(url: string): Promise<{ opened: number; sessionClosedBy: string | null }> {
  const session = http2.connect(url, { ca: fs.readFileSync(certs.caCert), peerMaxConcurrentStreams: 100_000 });
  let closedBy: string | null = null;
  session.on('error', (err: NodeJS.ErrnoException) => (closedBy ??= err.code ?? err.message));
  session.on('goaway', (code: number) => (closedBy ??= `GOAWAY ${code}`));
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const deadline = Date.now() + ATTACK_MS;
  let opened = 0;
  while (opened < ATTACK_STREAMS && Date.now() < deadline && !session.closed && !session.destroyed) {
    for (let i = 0; i < 100 && !session.closed && !session.destroyed; i++, opened++) {
      try {
        const stream = session.request({ ':path': '/v1/pets' });
        stream.on('error', () => undefined);
        stream.close(http2.constants.NGHTTP2_CANCEL);
      } catch {
        break;
      }
    }
    // Let the frames go out and the victim's requests in between bursts.
    await new Promise((resolve) => setImmediate(resolve));
  }
  session.destroy();
  return { opened, sessionClosedBy: closedBy };
}

it('streams opened and reset in a loop leave other clients’ latency as it was', async () => {
  const { auth } = await createKey(product, { plan: 'business' });
  const victim = new TlsClient(product.gatewayUrl, certs.caCert, 'h2');
  try {
    await latenciesMs(victim, auth, 5);
    const baseline = median(await latenciesMs(victim, auth, 30));
    const attack = rapidReset(product.gatewayUrl);
    const during = await latenciesMs(victim, auth, 30);
    const { opened, sessionClosedBy } = await attack;
    const underAttack = median(during);
    process.stdout.write(`rapid reset: ${opened} streams opened and reset; attacker session closed by ${sessionClosedBy ?? 'nothing'}; median latency ${baseline.toFixed(1)} ms before, ${underAttack.toFixed(1)} ms during\n`);
    expect(opened).toBeGreaterThan(500);
    // Generous for a shared 2-core machine: the median stays within 5x and 50 ms of its baseline.
    expect(underAttack).toBeLessThan(baseline * 5 + 50);
    // And the gateway still answers after it.
    expect((await victim.request({ path: '/v1/pets', headers: { authorization: auth } })).status).toBe(200);
  } finally {
    victim.close();
  }
});
