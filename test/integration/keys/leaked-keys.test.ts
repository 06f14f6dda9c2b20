import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { generateApiKey } from '../../../src/keys/key-format';
import { eventId } from '../../../src/notifications/events';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { createKey } from '../../support/keys';
import { eventually } from '../../support/eventually';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { expectMatchesOpenApi } from '../../support/openapi';

/**
 * A leaked key killed by whoever finds it (CONTRACT §4, §5): POST /v1/keys/revoke with the key
 * itself, and POST /admin/secret-scanning, the report a secret-scanning partner (GitHub's program)
 * signs with ECDSA P-256. Each revocation is audited with who made it and announced by a
 * `key.revoked` webhook, received by a real receiver that verifies it with `standardwebhooks`.
 * Both stores.
 */

jest.setTimeout(60_000);

interface AuditEntry {
  at: string;
  action: string;
  keyId: string;
  details: Record<string, unknown>;
}

/** A partner's signing key made here, as GitHub's would be: ECDSA on P-256. */
function partnerKeyPair(): { publicPem: string; privateKey: KeyObject } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return { publicPem: publicKey.export({ type: 'spki', format: 'pem' }) as string, privateKey };
}

const PARTNER_KEY_ID = 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c';
const partner = partnerKeyPair();
const stranger = partnerKeyPair();

/** base64 of the DER ECDSA signature of `body` with SHA-256, as the Github-Public-Key-Signature header carries it. */
function signatureOf(body: string, privateKey: KeyObject): string {
  return sign('sha256', Buffer.from(body), { key: privateKey, dsaEncoding: 'der' }).toString('base64');
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe.each([
  ['Redis', true],
  ['in process (SQLite)', false],
])('leaked keys on %s', (_label, onRedis) => {
  let product: ProductHarness;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    hooks = await new WebhookReceiver().start();
    product = await startTestProduct({
      redis: onRedis,
      overrides: {
        notifications: { webhooks: [{ url: hooks.url, secret: hooks.secret, events: ['key.revoked'] }] },
        secretScanning: { publicKeys: [{ id: PARTNER_KEY_ID, pem: partner.publicPem }] },
      },
    });
  });

  afterAll(async () => {
    await product?.close();
    await hooks?.stop();
  });

  function gateway(method: string, path: string, key?: string): Promise<Response> {
    return fetch(`${product.gatewayUrl}${path}`, {
      method,
      headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
    });
  }

  async function statusAndCode(res: Response): Promise<{ status: number; code?: string }> {
    const text = await res.text();
    return { status: res.status, code: text ? (JSON.parse(text) as { code?: string }).code : undefined };
  }

  async function auditOf(keyId: string): Promise<AuditEntry[]> {
    const res = await fetch(`${product.adminUrl}/admin/audit?limit=1000`, {
      headers: { authorization: `Bearer ${product.adminToken}` },
    });
    return ((await res.json()) as { entries: AuditEntry[] }).entries.filter((entry) => entry.keyId === keyId);
  }

  async function revokedWebhook(
    keyId: string,
  ): Promise<{ id: string; body: { type: string; data: Record<string, unknown> } }> {
    await eventually(() => hooks.deliveries.some((d) => d.body.data.keyId === keyId), {
      what: `key.revoked of ${keyId}`,
    });
    const deliveries = hooks.deliveries.filter((d) => d.body.data.keyId === keyId);
    expect(deliveries).toHaveLength(1);
    return deliveries[0]!;
  }

  /** The key's 401 once the revocation is seen (at once on this instance; eventually covers the change notification). */
  async function expectRevoked(key: string): Promise<void> {
    await eventually(
      async () => (await statusAndCode(await gateway('GET', '/v1/pets', key))).code === 'revoked_api_key',
      { what: 'revoked_api_key' },
    );
    expect(await statusAndCode(await gateway('GET', '/v1/pets', key))).toEqual({
      status: 401,
      code: 'revoked_api_key',
    });
  }

  describe('POST /v1/keys/revoke', () => {
    test('204; the key gets revoked_api_key from then on, audited by its holder, and a verified key.revoked webhook', async () => {
      const { id, key } = await createKey(product, { plan: 'pro' });
      expect((await gateway('GET', '/v1/pets', key)).status).toBe(200);

      const res = await gateway('POST', '/v1/keys/revoke', key);
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
      expectMatchesOpenApi('POST', '/keys/revoke', { status: res.status, headers: res.headers, text: '' });
      expect(res.headers.get('x-request-id')).toBeTruthy();
      await expectRevoked(key);
      // Revoking it again: its 401 like on any path, nothing more revoked.
      expect(await statusAndCode(await gateway('POST', '/v1/keys/revoke', key))).toEqual({
        status: 401,
        code: 'revoked_api_key',
      });

      const record = await product.keyService.get(id);
      expect(record!.revokedAt).not.toBeNull();
      const entries = await auditOf(id);
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        action: 'revoke',
        keyId: id,
        details: {
          revokedAt: record!.revokedAt,
          by: 'holder',
          clientAddress: expect.any(String),
          requestId: res.headers.get('x-request-id'),
        },
      });
      expect(JSON.stringify(entries[0])).not.toContain(key);

      const delivery = await revokedWebhook(id);
      expect(delivery.id).toBe(eventId('key.revoked', id, Date.parse(record!.revokedAt!)));
      expect(delivery.body).toMatchObject({
        type: 'key.revoked',
        data: { keyId: id, consumerId: null, revokedAt: record!.revokedAt, by: 'holder' },
      });
      expect(hooks.rejected).toEqual([]);
    });

    test('a key whose access policy does not list it, and a key out of units, can still revoke itself', async () => {
      const listed = await createKey(product, {
        plan: 'pro',
        allowedOperations: ['listPets'],
        allowedAddresses: ['192.0.2.0/24'],
      });
      // The policy is in force: this address is not allowed, for any operation.
      expect(await statusAndCode(await gateway('GET', '/v1/pets', listed.key))).toEqual({
        status: 403,
        code: 'address_not_allowed',
      });
      expect((await gateway('POST', '/v1/keys/revoke', listed.key)).status).toBe(204);
      await expectRevoked(listed.key);

      const limited = await createKey(product, { plan: 'enterprise', limits: { perMinute: 1, perDay: 100 } });
      expect((await gateway('GET', '/v1/pets', limited.key)).status).toBe(200);
      expect(await statusAndCode(await gateway('GET', '/v1/pets', limited.key))).toEqual({
        status: 429,
        code: 'rate_limited',
      });
      expect((await gateway('POST', '/v1/keys/revoke', limited.key)).status).toBe(204);
      await expectRevoked(limited.key);
    });

    test('other methods get 405 with Allow: POST; without a key, or with a made-up one, 401; each as openapi.yaml says', async () => {
      const { key } = await createKey(product, { plan: 'pro' });
      const get = await gateway('GET', '/v1/keys/revoke', key);
      const getText = await get.clone().text();
      expect(await statusAndCode(get)).toEqual({ status: 405, code: 'method_not_allowed' });
      expect(get.headers.get('allow')).toBe('POST');
      expectMatchesOpenApi('GET', '/keys/revoke', { status: get.status, headers: get.headers, text: getText });
      for (const [presented, code] of [
        [undefined, 'missing_api_key'],
        [generateApiKey(product.config.keys.prefix), 'invalid_api_key'],
      ] as const) {
        const res = await gateway('POST', '/v1/keys/revoke', presented);
        const text = await res.text();
        expect({ status: res.status, code: (JSON.parse(text) as { code: string }).code }).toEqual({
          status: 401,
          code,
        });
        expectMatchesOpenApi('POST', '/keys/revoke', { status: res.status, headers: res.headers, text });
      }
      // The key that asked for 405 still works.
      expect((await gateway('GET', '/v1/pets', key)).status).toBe(200);
    });

    test('an admin revocation sends key.revoked too, by admin, and its audit entry says so', async () => {
      const { id } = await createKey(product, { plan: 'pro' });
      const res = await fetch(`${product.adminUrl}/admin/keys/${id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${product.adminToken}` },
      });
      expect(res.status).toBe(204);
      const delivery = await revokedWebhook(id);
      expect(delivery.body.data).toMatchObject({ keyId: id, by: 'admin' });
      expect((await auditOf(id))[0]).toMatchObject({ action: 'revoke', details: { by: 'admin' } });
    });
  });

  describe('POST /admin/secret-scanning', () => {
    function report(body: string, headers: Record<string, string>): Promise<Response> {
      return fetch(`${product.adminUrl}/admin/secret-scanning`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    }

    function signedReport(body: string, privateKey = partner.privateKey, keyId = PARTNER_KEY_ID): Promise<Response> {
      return report(body, {
        'Github-Public-Key-Identifier': keyId,
        'Github-Public-Key-Signature': signatureOf(body, privateKey),
      });
    }

    test('real keys are revoked and answered true_positive, others false_positive; the same report again changes nothing', async () => {
      const prefix = product.config.keys.prefix;
      const leaked = await createKey(product, { plan: 'pro' });
      const alreadyRevoked = await createKey(product, { plan: 'pro' });
      expect((await gateway('POST', '/v1/keys/revoke', alreadyRevoked.key)).status).toBe(204);
      const neverIssued = generateApiKey(prefix);
      const badChecksum = leaked.key.slice(0, -1) + (leaked.key.endsWith('a') ? 'b' : 'a');
      const tokens = [
        {
          token: leaked.key,
          type: 'animal_store_api_key',
          url: 'https://github.com/octo/repo/blob/abc/config.js',
          source: 'content',
        },
        {
          token: neverIssued,
          type: 'animal_store_api_key',
          url: 'https://github.com/octo/repo/blob/abc/a.js',
          source: 'content',
        },
        { token: alreadyRevoked.key, type: 'animal_store_api_key', source: 'commit' },
        { token: badChecksum, type: 'animal_store_api_key' },
        { token: 'asg_other_0000', type: 'animal_store_api_key' },
      ];
      const body = JSON.stringify(tokens);
      const labels = tokens.map((t, i) => ({
        token_hash: sha256(t.token),
        token_type: 'animal_store_api_key',
        label: i === 0 || i === 2 ? 'true_positive' : 'false_positive',
      }));

      const first = await signedReport(body);
      expect(first.status).toBe(200);
      expect(await first.json()).toEqual(labels);
      await expectRevoked(leaked.key);
      const entries = await auditOf(leaked.id);
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        action: 'revoke',
        details: { by: 'secret-scanning', tokenType: 'animal_store_api_key', url: tokens[0]!.url, source: 'content' },
      });
      expect(JSON.stringify(entries[0])).not.toContain(leaked.key);
      expect((await revokedWebhook(leaked.id)).body.data).toMatchObject({ keyId: leaked.id, by: 'secret-scanning' });

      // The partner sends it again: the same answer, no second revocation, entry or webhook.
      const again = await signedReport(body);
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual(labels);
      expect(await auditOf(leaked.id)).toHaveLength(1);
      expect((await auditOf(alreadyRevoked.id)).map((e) => e.details.by)).toEqual(['holder']);
      expect(hooks.deliveries.filter((d) => d.body.data.keyId === leaked.id)).toHaveLength(1);
      expect(hooks.rejected).toEqual([]);
    });

    test('a signature made with another key, over another body, or none: 401 and nothing revoked', async () => {
      const { key } = await createKey(product, { plan: 'pro' });
      const body = JSON.stringify([{ token: key, type: 'animal_store_api_key' }]);
      const refusals = [
        await signedReport(body, stranger.privateKey),
        await report(body, {
          'Github-Public-Key-Identifier': PARTNER_KEY_ID,
          'Github-Public-Key-Signature': signatureOf('[]', partner.privateKey),
        }),
        await report(body, {
          'Github-Public-Key-Identifier': PARTNER_KEY_ID,
          'Github-Public-Key-Signature': 'bm90IGEgc2lnbmF0dXJl',
        }),
        await report(body, {}),
        await report(body, { 'Github-Public-Key-Signature': signatureOf(body, partner.privateKey) }),
      ];
      for (const res of refusals) {
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ code: 'invalid_api_key', message: expect.any(String), status: 401 });
      }
      // The admin token does not stand in for a signature either.
      const withToken = await report(body, { authorization: `Bearer ${product.adminToken}` });
      expect(withToken.status).toBe(401);
      expect((await gateway('GET', '/v1/pets', key)).status).toBe(200);
    });

    test('a key identifier that is not configured: 401, even with a good signature of its own key', async () => {
      const { key } = await createKey(product, { plan: 'pro' });
      const body = JSON.stringify([{ token: key, type: 'animal_store_api_key' }]);
      const res = await signedReport(body, stranger.privateKey, 'not-a-configured-key');
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('invalid_api_key');
      expect((await gateway('GET', '/v1/pets', key)).status).toBe(200);
    });

    test.each([
      ['not JSON', 'invalid_json', 'nonsense'],
      ['not a list', 'validation_failed', JSON.stringify({ token: 'x', type: 'y' })],
      ['a token that is not a string', 'validation_failed', JSON.stringify([{ token: 7, type: 'y' }])],
      [
        'more than 1,000 tokens',
        'validation_failed',
        JSON.stringify(Array.from({ length: 1001 }, () => ({ token: 'x', type: 'y' }))),
      ],
    ])('a signed body that is %s: 400 %s', async (_label, code, body) => {
      const res = await signedReport(body);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ code, message: expect.any(String), status: 400 });
    });

    test('a body over 1 MiB: 413', async () => {
      const body = JSON.stringify([{ token: 'x'.repeat(1024 * 1024), type: 'y' }]);
      const res = await signedReport(body);
      expect(res.status).toBe(413);
      expect(((await res.json()) as { code: string }).code).toBe('payload_too_large');
    });
  });
});
