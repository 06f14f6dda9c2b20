import { createHash } from 'node:crypto';
import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import type { ProductHarness } from '../../support/product-harness';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';
import { awayFromMinuteEnd } from '../../support/minute-end';

/**
 * The key lifecycle (CONTRACT §4–§5: expiry, rotation, usage history, last use, audit trail) as one
 * suite that runs on every store: in process (one instance), Redis and Redis Cluster (two instances
 * A and B on one namespace). One ManualClock drives both instances' view of time (expiry, grace
 * periods, UTC days), so nothing sleeps; the limiter's windows follow Redis TIME on the shared stores.
 */
export interface LifecycleProducts {
  a: ProductHarness;
  /** A second instance on the same store; `a` itself for the in-process store. */
  b: ProductHarness;
  close(): Promise<void>;
}

/** Every product of the suite must use this config, and `clock` as its clock. */
export const LIFECYCLE_OVERRIDES = {
  // Loopback's X-Forwarded-For is trusted so each test gets its own client address; the anonymous
  // limit is small so a key refused while counting against it would show.
  anonymous: { perMinute: 2 },
  server: { host: '127.0.0.1', trustedProxies: ['127.0.0.1'] },
  // Long enough that an entry never runs out during a test: expiry must be seen on the cached record.
  keys: { cacheTtlSeconds: 3600 },
};

const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

export function keyLifecycleSuite(storeName: string, start: (clock: ManualClock) => Promise<LifecycleProducts>): void {
  describe(`key lifecycle on ${storeName}`, () => {
    const clock = new ManualClock(Date.now());
    let products: LifecycleProducts;
    let a: ProductHarness;
    let b: ProductHarness;

    beforeAll(async () => {
      products = await start(clock);
      ({ a, b } = products);
    }, 60_000);

    afterAll(async () => {
      await products?.close();
    });

    let addressCounter = 0;
    function freshAddress(): string {
      addressCounter += 1;
      return `198.51.${Math.floor(addressCounter / 250)}.${(addressCounter % 250) + 1}`;
    }

    function adminOf(product: ProductHarness, method: 'get' | 'post' | 'patch' | 'delete', path: string): request.Test {
      return request(product.adminUrl)[method](path).set('Authorization', `Bearer ${product.adminToken}`);
    }

    function call(product: ProductHarness, key: string, address = freshAddress()): request.Test {
      return request(product.gatewayUrl)
        .get('/v1/pets?limit=1')
        .set('Authorization', `Bearer ${key}`)
        .set('X-Forwarded-For', address);
    }

    async function rotate(
      product: ProductHarness,
      id: string,
      body?: object,
    ): Promise<{ key: string; previousKeyExpiresAt: string }> {
      const req = adminOf(product, 'post', `/admin/keys/${id}/rotate`);
      const res = await (body === undefined ? req : req.send(body));
      expect(res.status).toBe(201);
      return res.body as { key: string; previousKeyExpiresAt: string };
    }

    async function shown(
      product: ProductHarness,
      id: string,
    ): Promise<Record<string, unknown> & { usage: { minute: { remaining: number }; day: { remaining: number } } }> {
      return (await adminOf(product, 'get', `/admin/keys/${id}`).expect(200)).body as never;
    }

    describe('expiry', () => {
      it('a key cached on instance B is refused from its expiresAt on, on both instances, without using the anonymous limit', async () => {
        const expiresAt = new Date(clock.now() + 2000).toISOString();
        const created = await createKey(a, { name: 'contractor', plan: 'free', expiresAt }, { overApi: true });
        expect(created.expiresAt).toBe(expiresAt);
        // B resolves the key, so the record sits in B's cache (TTL one hour) when it expires.
        for (let i = 0; i < 2; i++) await call(b, created.key).expect(200);

        clock.advance(2000);
        const address = freshAddress();
        // More refusals than the anonymous limit (2) from one address: each is still expired_api_key.
        for (const product of [b, a, b, a]) {
          const res = await call(product, created.key, address);
          expectError(res, 401, 'expired_api_key');
          expect(res.headers['www-authenticate']).toBe(
            'Bearer realm="animal-store", error="invalid_token", error_description="This API key has expired."',
          );
          expect(res.headers['x-ratelimit-limit']).toBe('2');
        }
        const metrics = await request(b.adminUrl).get('/metrics').expect(200);
        const expiredRefusals = /^gateway_auth_failures_total\{reason="expired"\} (\d+)$/m.exec(metrics.text);
        expect(Number(expiredRefusals?.[1])).toBeGreaterThanOrEqual(2);
        const listed = (await adminOf(b, 'get', '/admin/keys').expect(200)).body as Array<{
          id: string;
          expiresAt: string | null;
        }>;
        expect(listed.find((k) => k.id === created.id)?.expiresAt).toBe(expiresAt);
      });

      it('PATCH sets an expiry that applies on the cached record at once, and expiresAt: null removes it', async () => {
        const created = await createKey(a, { name: 'to expire', plan: 'free' }, { overApi: true });
        expect(created.expiresAt).toBeNull();
        await call(b, created.key).expect(200);

        const soon = new Date(clock.now() + 1000).toISOString();
        const patched = await adminOf(b, 'patch', `/admin/keys/${created.id}`).send({ expiresAt: soon }).expect(200);
        expect((patched.body as { expiresAt: string }).expiresAt).toBe(soon);
        clock.advance(1000);
        for (const product of [a, b]) expectError(await call(product, created.key), 401, 'expired_api_key');

        const cleared = await adminOf(a, 'patch', `/admin/keys/${created.id}`).send({ expiresAt: null }).expect(200);
        expect((cleared.body as { expiresAt: string | null }).expiresAt).toBeNull();
        for (const product of [a, b]) {
          await eventually(async () => (await call(product, created.key)).status === 200, { timeoutMs: 1000 });
        }
      });

      it('an offset instant is kept as the same instant in UTC', async () => {
        const at = clock.now() + 3_600_000;
        const local = new Date(at + 2 * 3_600_000).toISOString().replace('Z', '+02:00');
        const created = await createKey(a, { name: 'offset', plan: 'free', expiresAt: local }, { overApi: true });
        expect(created.expiresAt).toBe(new Date(at).toISOString());
      });

      it.each([
        ['a past instant', () => new Date(clock.now() - 1000).toISOString()],
        ['the current instant', () => new Date(clock.now()).toISOString()],
        ['a date without a time', () => '2030-01-01'],
        ['a time without a zone', () => '2030-01-01T00:00:00'],
        ['not a date', () => 'friday'],
        ['a number', () => 1_900_000_000],
        ['an impossible date', () => '2030-02-31T00:00:00Z'],
      ])(
        '400 validation_failed for expiresAt as %s, on create and on PATCH, and nothing written',
        async (_what, value) => {
          const before = ((await adminOf(a, 'get', '/admin/keys').expect(200)).body as unknown[]).length;
          expectError(
            await adminOf(a, 'post', '/admin/keys').send({ name: 'bad expiry', plan: 'free', expiresAt: value() }),
            400,
            'validation_failed',
          );
          expect(((await adminOf(a, 'get', '/admin/keys').expect(200)).body as unknown[]).length).toBe(before);

          const created = await createKey(a, { name: 'patched badly', plan: 'free' }, { overApi: true });
          expectError(
            await adminOf(a, 'patch', `/admin/keys/${created.id}`).send({ expiresAt: value() }),
            400,
            'validation_failed',
          );
          expect((await shown(a, created.id)).expiresAt).toBeNull();
        },
      );
    });

    describe('rotation', () => {
      it('201 with the new secret once; the same id, plan, limits and windows; the old secret works until previousKeyExpiresAt, then expired_api_key', async () => {
        const created = await createKey(
          a,
          { name: 'rotated', plan: 'pro', limits: { perMinute: 100, perDay: 1000 } },
          { overApi: true },
        );
        await awayFromMinuteEnd(8_000);
        for (let i = 0; i < 3; i++) await call(i % 2 === 0 ? a : b, created.key).expect(200);

        const res = await adminOf(b, 'post', `/admin/keys/${created.id}/rotate`).send({ graceSeconds: 60 });
        expect(res.status).toBe(201);
        const body = res.body as Record<string, unknown>;
        expect(body).toEqual({
          id: created.id,
          key: expect.stringMatching(/^asg_dev_/),
          name: 'rotated',
          plan: 'pro',
          limits: { perMinute: 100, perDay: 1000 },
          createdAt: expect.stringMatching(ISO_INSTANT),
          revokedAt: null,
          expiresAt: null,
          consumerId: null,
          allowedOperations: null,
          allowedAddresses: null,
          lastUsedAt: expect.anything(),
          previousKeyExpiresAt: new Date(clock.now() + 60_000).toISOString(),
        });
        const newKey = body.key as string;
        expect(newKey).not.toBe(created.key);

        // Both secrets, on both instances, count on the same windows.
        for (const product of [a, b]) {
          await call(product, created.key).expect(200);
          await call(product, newKey).expect(200);
        }
        const view = await shown(a, created.id);
        expect(view.usage.minute.remaining).toBe(100 - 7);
        expect(view.usage.day.remaining).toBe(1000 - 7);
        expect(view.previousKeyExpiresAt).toBe(body.previousKeyExpiresAt);
        expect(JSON.stringify(view)).not.toContain(newKey);

        clock.advance(60_000);
        for (const product of [a, b]) {
          const refused = await call(product, created.key);
          expectError(refused, 401, 'expired_api_key');
          await call(product, newKey).expect(200);
        }
      });

      it('the default grace period is one day, and a body is optional', async () => {
        const created = await createKey(a, { name: 'default grace', plan: 'free' }, { overApi: true });
        const rotated = await rotate(a, created.id);
        expect(rotated.previousKeyExpiresAt).toBe(new Date(clock.now() + 86_400_000).toISOString());
        await call(b, created.key).expect(200);
      });

      it('graceSeconds 0 ends the old secret at once', async () => {
        const created = await createKey(a, { name: 'no grace', plan: 'free' }, { overApi: true });
        await call(b, created.key).expect(200);
        const rotated = await rotate(a, created.id, { graceSeconds: 0 });
        for (const product of [a, b]) {
          await eventually(async () => (await call(product, created.key)).status === 401, { timeoutMs: 1000 });
          expectError(await call(product, created.key), 401, 'expired_api_key');
          await call(product, rotated.key).expect(200);
        }
      });

      it('rotating again ends the older previous secret at once; revoking ends both secrets', async () => {
        const created = await createKey(a, { name: 'twice', plan: 'free' }, { overApi: true });
        const first = await rotate(a, created.id, { graceSeconds: 3600 });
        await call(b, created.key).expect(200);
        await call(b, first.key).expect(200);
        const second = await rotate(b, created.id, { graceSeconds: 3600 });
        for (const product of [a, b]) {
          await eventually(async () => (await call(product, created.key)).status === 401, { timeoutMs: 1000 });
          expectError(await call(product, created.key), 401, 'invalid_api_key');
          await call(product, first.key).expect(200);
          await call(product, second.key).expect(200);
        }

        await adminOf(a, 'delete', `/admin/keys/${created.id}`).expect(204);
        for (const product of [a, b]) {
          for (const key of [first.key, second.key]) {
            await eventually(async () => (await call(product, key)).status === 401, { timeoutMs: 1000 });
            expectError(await call(product, key), 401, 'revoked_api_key');
          }
        }
        expectError(
          await adminOf(b, 'post', `/admin/keys/${created.id}/rotate`).send({ graceSeconds: 10 }),
          409,
          'conflict',
        );
      });

      it('keeps a running ban', async () => {
        const created = await createKey(
          a,
          { name: 'banned', plan: 'free', limits: { perMinute: 1, perDay: 1000 } },
          { overApi: true },
        );
        await awayFromMinuteEnd(8_000);
        await call(a, created.key).expect(200);
        // Refusals past ban.threshold (10) ban the key.
        for (let i = 0; i < 11; i++) await call(i % 2 === 0 ? a : b, created.key);
        const before = await shown(a, created.id);
        expect(before.bannedUntil).not.toBeNull();
        const rotated = await rotate(b, created.id, { graceSeconds: 60 });
        for (const product of [a, b]) expectError(await call(product, rotated.key), 429, 'temporarily_banned');
        expect((await shown(b, created.id)).bannedUntil).toBe(before.bannedUntil);
      });

      it('under concurrent traffic on both secrets and both instances, a rotation neither resets nor double-counts the windows', async () => {
        const limit = 50;
        const created = await createKey(
          a,
          { name: 'busy', plan: 'free', limits: { perMinute: limit, perDay: 1000 } },
          { overApi: true },
        );
        await awayFromMinuteEnd(8_000);
        const send = (key: string, i: number) => call(i % 2 === 0 ? a : b, key).then((res) => res.status);
        const before = await Promise.all(Array.from({ length: 20 }, (_, i) => send(created.key, i)));
        // The rotation runs while 20 more requests with the old secret are in flight.
        const [rotated, during] = await Promise.all([
          rotate(b, created.id, { graceSeconds: 3600 }),
          Promise.all(Array.from({ length: 20 }, (_, i) => send(created.key, i))),
        ]);
        const after = await Promise.all(
          Array.from({ length: 20 }, (_, i) => send(i % 2 === 0 ? rotated.key : created.key, i)),
        );
        const statuses = [...before, ...during, ...after];
        expect(statuses.filter((s) => s === 200)).toHaveLength(limit);
        expect(statuses.filter((s) => s === 429)).toHaveLength(60 - limit);
        const view = await shown(b, created.id);
        expect(view.usage.minute.remaining).toBe(0);
        expect(view.usage.day.remaining).toBe(1000 - limit);
      });

      it.each([
        ['a negative grace', { graceSeconds: -1 }],
        ['more than a week', { graceSeconds: 604_801 }],
        ['a fraction', { graceSeconds: 1.5 }],
        ['a string', { graceSeconds: '60' }],
        ['null', { graceSeconds: null }],
        ['an unknown field', { grace: 60 }],
        ['an array', [60]],
      ])('400 validation_failed for %s, and the secret is unchanged', async (_what, body) => {
        const created = await createKey(a, { name: 'bad rotation', plan: 'free' }, { overApi: true });
        expectError(
          await adminOf(a, 'post', `/admin/keys/${created.id}/rotate`).send(body as object),
          400,
          'validation_failed',
        );
        expect((await shown(a, created.id)).previousKeyExpiresAt).toBeNull();
        await call(b, created.key).expect(200);
      });

      it('415 for a body that is not JSON, 400 for malformed JSON, 404 for an unknown key', async () => {
        const created = await createKey(a, { name: 'rotation body', plan: 'free' }, { overApi: true });
        const path = `/admin/keys/${created.id}/rotate`;
        expectError(
          await adminOf(a, 'post', path).set('Content-Type', 'text/plain').send('graceSeconds=5'),
          415,
          'unsupported_media_type',
        );
        expectError(
          await adminOf(a, 'post', path).set('Content-Type', 'application/json').send('{"graceSeconds":'),
          400,
          'invalid_json',
        );
        expectError(
          await adminOf(a, 'post', '/admin/keys/key_000000000000000000000000/rotate').send({}),
          404,
          'not_found',
        );
        expect((await shown(a, created.id)).previousKeyExpiresAt).toBeNull();
      });
    });

    describe('usage history and last use', () => {
      it('counts admitted, rate-limited and banned requests per UTC day, from every instance exactly; lastUsedAt follows', async () => {
        const created = await createKey(
          a,
          { name: 'counted', plan: 'free', limits: { perMinute: 5, perDay: 1000 } },
          { overApi: true },
        );
        const listedBefore = (await adminOf(a, 'get', '/admin/keys').expect(200)).body as Array<{
          id: string;
          lastUsedAt: string | null;
        }>;
        expect(listedBefore.find((k) => k.id === created.id)?.lastUsedAt).toBeNull();
        await awayFromMinuteEnd(8_000);
        // 5 admitted, 11 rate-limited (the 11th bans), then 4 banned: split over both instances.
        const statuses: number[] = [];
        for (let i = 0; i < 20; i++) statuses.push((await call(i % 2 === 0 ? a : b, created.key)).status);
        expect(statuses.filter((s) => s === 200)).toHaveLength(5);

        const expectedToday = { admitted: 5, rateLimited: 11, banned: 4 };
        // B flushes on its own timer (every 5 s): the history may lag by that much, no more.
        await eventually(
          async () => {
            const res = await adminOf(a, 'get', `/admin/keys/${created.id}/usage?days=3`).expect(200);
            const days = (res.body as { days: Array<Record<string, unknown>> }).days;
            return (
              JSON.stringify(days[2]) ===
              JSON.stringify({ date: new Date(clock.now()).toISOString().slice(0, 10), ...expectedToday })
            );
          },
          { timeoutMs: 7000 },
        );
        const res = await adminOf(b, 'get', `/admin/keys/${created.id}/usage?days=3`).expect(200);
        const today = new Date(clock.now()).toISOString().slice(0, 10);
        const dayBefore = (n: number) => new Date(clock.now() - n * 86_400_000).toISOString().slice(0, 10);
        expect(res.body).toEqual({
          keyId: created.id,
          days: [
            { date: dayBefore(2), admitted: 0, rateLimited: 0, banned: 0 },
            { date: dayBefore(1), admitted: 0, rateLimited: 0, banned: 0 },
            { date: today, ...expectedToday },
          ],
        });
        expect(
          ((await adminOf(a, 'get', `/admin/keys/${created.id}/usage`).expect(200)).body as { days: unknown[] }).days,
        ).toHaveLength(30);
        expect(
          ((await adminOf(a, 'get', `/admin/keys/${created.id}/usage?days=90`).expect(200)).body as { days: unknown[] })
            .days,
        ).toHaveLength(90);

        const listed = (await adminOf(b, 'get', '/admin/keys').expect(200)).body as Array<{
          id: string;
          lastUsedAt: string | null;
        }>;
        expect(listed.find((k) => k.id === created.id)?.lastUsedAt).toBe(new Date(clock.now()).toISOString());
        expect((await shown(a, created.id)).lastUsedAt).toBe(new Date(clock.now()).toISOString());

        // The next UTC day starts a new row; yesterday's stays.
        clock.advance(86_400_000);
        const next = await adminOf(a, 'get', `/admin/keys/${created.id}/usage?days=2`).expect(200);
        expect((next.body as { days: unknown[] }).days).toEqual([
          { date: today, ...expectedToday },
          { date: new Date(clock.now()).toISOString().slice(0, 10), admitted: 0, rateLimited: 0, banned: 0 },
        ]);
      });

      it('a rotated key keeps its history: both secrets count on the one key', async () => {
        const created = await createKey(a, { name: 'history kept', plan: 'free' }, { overApi: true });
        await call(a, created.key).expect(200);
        const rotated = await rotate(b, created.id, { graceSeconds: 60 });
        await call(b, created.key).expect(200);
        await call(a, rotated.key).expect(200);
        await eventually(
          async () => {
            const res = await adminOf(a, 'get', `/admin/keys/${created.id}/usage?days=1`).expect(200);
            return (res.body as { days: Array<{ admitted: number }> }).days[0]!.admitted === 3;
          },
          { timeoutMs: 7000 },
        );
      });

      it.each(['0', '91', '-1', '1.5', 'x', '', '30&days=2'])('400 invalid_parameter for days=%s', async (days) => {
        const created = await createKey(a, { name: 'usage params', plan: 'free' }, { overApi: true });
        expectError(await adminOf(a, 'get', `/admin/keys/${created.id}/usage?days=${days}`), 400, 'invalid_parameter');
      });

      it('404 for an unknown key', async () => {
        expectError(await adminOf(a, 'get', '/admin/keys/key_000000000000000000000000/usage'), 404, 'not_found');
      });
    });

    describe('audit trail', () => {
      it('holds every admin write from every instance, newest first, never a key or hash', async () => {
        const created = await createKey(
          a,
          { name: 'audited', plan: 'free', expiresAt: new Date(clock.now() + 86_400_000).toISOString() },
          { overApi: true },
        );
        await adminOf(b, 'patch', `/admin/keys/${created.id}`).send({ plan: 'pro', name: 'audited 2' }).expect(200);
        const rotated = await rotate(a, created.id, { graceSeconds: 30 });
        await adminOf(b, 'delete', `/admin/keys/${created.id}/ban`).expect(204);
        await adminOf(a, 'delete', `/admin/keys/${created.id}`).expect(204);

        for (const product of [a, b]) {
          const res = await adminOf(product, 'get', '/admin/audit?limit=5').expect(200);
          const entries = (
            res.body as {
              entries: Array<{ at: string; action: string; keyId: string; details: Record<string, unknown> }>;
            }
          ).entries;
          expect(entries.map((e) => e.action)).toEqual(['revoke', 'unban', 'rotate', 'update', 'create']);
          for (const entry of entries) {
            expect(entry.keyId).toBe(created.id);
            expect(entry.at).toMatch(ISO_INSTANT);
          }
          expect(entries[3]!.details).toEqual({ plan: 'pro', name: 'audited 2' });
          expect(entries[2]!.details).toEqual({ graceSeconds: 30, previousKeyExpiresAt: rotated.previousKeyExpiresAt });
          expect(entries[4]!.details).toMatchObject({ name: 'audited', plan: 'free', expiresAt: created.expiresAt });
          const text = JSON.stringify(res.body);
          for (const secret of [created.key, rotated.key]) {
            expect(text).not.toContain(secret);
            expect(text).not.toContain(sha256(secret));
          }
        }
        const defaultLimit = await adminOf(a, 'get', '/admin/audit').expect(200);
        expect((defaultLimit.body as { entries: unknown[] }).entries.length).toBeGreaterThanOrEqual(5);
        expect((defaultLimit.body as { entries: unknown[] }).entries.length).toBeLessThanOrEqual(100);
      });

      it.each(['0', '1001', '-5', '2.5', 'ten', ''])('400 invalid_parameter for limit=%s', async (limit) => {
        expectError(await adminOf(b, 'get', `/admin/audit?limit=${limit}`), 400, 'invalid_parameter');
      });

      it('401 without the admin token', async () => {
        const res = await request(a.adminUrl).get('/admin/audit');
        expectError(res, 401, 'missing_api_key');
      });
    });
  });
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
