import { startRedisServer, freePort, type RedisProcess } from '../../support/redis-server';
import { makeTestCertificates, redisTlsArgs, type TestCertificates } from '../../support/tls-certs';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import request from 'supertest';
import { createKey } from '../../support/keys';

/**
 * Redis over TLS (CONTRACT §2: rediss://, REDIS_TLS_CA_FILE, REDIS_TLS_CERT_FILE/KEY_FILE), on a
 * real redis-server with a TLS listener and certificates made by openssl for this run. A
 * certificate that fails verification stops startup with one line naming the setting.
 */

let certs: TestCertificates;
let oneWay: RedisProcess;
let oneWayTlsPort: number;
let mutual: RedisProcess;
let mutualTlsPort: number;

beforeAll(async () => {
  certs = makeTestCertificates();
  oneWayTlsPort = await freePort();
  oneWay = await startRedisServer(redisTlsArgs(certs, oneWayTlsPort, { requireClientCert: false }));
  mutualTlsPort = await freePort();
  mutual = await startRedisServer(redisTlsArgs(certs, mutualTlsPort, { requireClientCert: true }));
});

afterAll(async () => {
  await oneWay?.stop();
  await mutual?.stop();
});

async function startOn(url: string, tls: Record<string, string | null>): Promise<ProductHarness> {
  return startTestProduct({
    overrides: { redis: { url, tls: { caFile: null, certFile: null, keyFile: null, ...tls } } },
  });
}

async function startupFailure(url: string, tls: Record<string, string | null>): Promise<string> {
  try {
    const product = await startOn(url, tls);
    await product.close();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the product started');
}

describe('Redis over TLS', () => {
  it('rediss:// with REDIS_TLS_CA_FILE: the whole product works, and the data is on that Redis', async () => {
    const product = await startOn(`rediss://127.0.0.1:${oneWayTlsPort}`, { caFile: certs.caCert });
    try {
      const { auth } = await createKey(product, { plan: 'free' });
      const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);
      expect(res.status).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe('59');
    } finally {
      await product.close();
    }
  });

  it("a CA that did not sign the server's certificate: startup stops with one line naming REDIS_TLS_CA_FILE", async () => {
    expect(await startupFailure(`rediss://127.0.0.1:${oneWayTlsPort}`, { caFile: certs.otherCaCert })).toMatch(
      /^Redis's TLS certificate failed verification \([A-Z_]+\); check REDIS_TLS_CA_FILE$/,
    );
  });

  it("no CA given: the system's CAs do not know ours, so startup stops the same way (there is no unverified mode)", async () => {
    expect(await startupFailure(`rediss://127.0.0.1:${oneWayTlsPort}`, {})).toMatch(
      /^Redis's TLS certificate failed verification/,
    );
  });

  it('the certificate names localhost too: rediss://localhost works with the same CA', async () => {
    const product = await startOn(`rediss://localhost:${oneWayTlsPort}`, { caFile: certs.caCert });
    await product.close();
  });

  it('mutual TLS: with the client certificate the product works; without it startup stops with one line', async () => {
    const product = await startOn(`rediss://127.0.0.1:${mutualTlsPort}`, {
      caFile: certs.caCert,
      certFile: certs.clientCert,
      keyFile: certs.clientKey,
    });
    try {
      const { auth } = await createKey(product, { plan: 'free' });
      expect((await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth)).status).toBe(200);
    } finally {
      await product.close();
    }
    const message = await startupFailure(`rediss://127.0.0.1:${mutualTlsPort}`, { caFile: certs.caCert });
    // Which one depends on whether the server's alert arrives before the reset.
    expect([
      'Redis requires a client certificate (ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED); set REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE',
      'Redis closed the TLS connection during the handshake (ECONNRESET); if it requires client certificates, set REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE',
    ]).toContain(message);
  });

  it('rediss:// to a plain port: one line, no retry loop', async () => {
    // The plain listener waits for a command that never comes: the connect timeout (2 s) ends it.
    expect(await startupFailure(`rediss://127.0.0.1:${oneWay.port}`, { caFile: certs.caCert })).toBe(
      'Redis is unreachable (ETIMEDOUT); check REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS',
    );
  });
});
