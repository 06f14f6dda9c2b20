import Redis from 'ioredis';
import request from 'supertest';
import { startSentinelSetup, type SentinelSetup } from '../../support/redis-sentinel';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct } from '../../support/product-harness';
import { createKey } from '../../support/keys';

/**
 * Sentinel with TLS (CONTRACT §2: REDIS_SENTINELS with the REDIS_TLS_* settings): the primary, the
 * replica and the sentinels all speak TLS with certificates made by openssl for this run, and the
 * gateway verifies them with REDIS_TLS_CA_FILE, both to the sentinels and to the data nodes.
 */

let certs: TestCertificates;
let setup: SentinelSetup;

beforeAll(async () => {
  certs = makeTestCertificates();
  setup = await startSentinelSetup('mymaster', { tls: certs });
  // A hang guard above the setup's own (120 s for the sentinels, besides each Redis's start).
}, 180_000);

afterAll(async () => {
  await setup?.stop();
});

function sentinelSettings(caFile: string) {
  return {
    url: null,
    sentinels: setup.sentinels,
    sentinelName: setup.name,
    tls: { caFile, certFile: null, keyFile: null },
  };
}

it('finds the primary through the sentinels over TLS and keeps its keys there', async () => {
  const namespace = uniqueNamespace('sentinel-tls');
  const product = await startTestProduct({ namespace, overrides: { redis: sentinelSettings(certs.caCert) } });
  try {
    const { auth } = await createKey(product, { plan: 'free' });
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-remaining']).toBe('59');
  } finally {
    await product.close();
  }
  // On the primary the sentinels named (looked at through its plain port): the key and its windows.
  const primary = new Redis(setup.primary.port, '127.0.0.1', { maxRetriesPerRequest: 0 });
  try {
    const keys = (await primary.keys(`${namespace}:*`)) as string[];
    expect(keys.some((key) => key.includes(':keys:'))).toBe(true);
    expect(keys.some((key) => key.includes(':rl:{'))).toBe(true);
  } finally {
    primary.disconnect();
  }
});

it('a CA that did not sign the certificates: startup stops with one line naming REDIS_TLS_CA_FILE', async () => {
  await expect(
    startTestProduct({
      namespace: uniqueNamespace('sentinel-tls'),
      overrides: { redis: sentinelSettings(certs.otherCaCert) },
    }),
  ).rejects.toThrow(/^Redis's TLS certificate failed verification \(.*\); check REDIS_TLS_CA_FILE$/);
});
