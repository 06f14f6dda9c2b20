import { ManualClock } from '../../../src/shared/clock';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { expectError } from '../../support/errors';
import { adminRequest, gatewayGet } from '../admin/admin-kit';

/**
 * A key moved to another consumer by an import (issue 48, item 5) keeps the units it used in each
 * window and its ban, as the same move by PATCH does (its windows live beside its consumer's, so
 * they are carried over): an import never resets a key's counts nor lifts its ban.
 */

/** A moment well inside a UTC minute and day: the counts below never straddle a window. */
const MID_MINUTE = Date.UTC(2026, 2, 10, 12, 30, 15);
const BAN_THRESHOLD = 2;
const KEY_LIMITS = { perMinute: 2, perDay: 100 };

describe.each([
  ['on Redis', true],
  ['in process', false],
] as const)('a key moved to another consumer %s', (_label, redis) => {
  const clock = new ManualClock(MID_MINUTE);
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({
      redis,
      clock,
      overrides: { ban: { threshold: BAN_THRESHOLD, windowSeconds: 60, durationSeconds: 900 } },
    });
  });
  afterAll(() => product?.close());

  async function consumer(name: string): Promise<string> {
    const res = await adminRequest(product, 'post', '/admin/consumers').send({
      name,
      limits: { perMinute: 100, perDay: 1000 },
    });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  /** A key of `consumerId` that used its minute and was refused until banned. */
  async function bannedKey(consumerId: string): Promise<{ id: string; key: string }> {
    const created = await adminRequest(product, 'post', '/admin/keys').send({
      name: 'hammered',
      plan: 'pro',
      limits: KEY_LIMITS,
      consumerId,
    });
    expect(created.status).toBe(201);
    const statuses: number[] = [];
    for (let i = 0; i < KEY_LIMITS.perMinute + BAN_THRESHOLD + 1; i++)
      statuses.push((await gatewayGet(product, created.body.key)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(KEY_LIMITS.perMinute);
    return { id: created.body.id, key: created.body.key };
  }

  async function keyState(id: string) {
    const res = await adminRequest(product, 'get', `/admin/keys/${id}`);
    expect(res.status).toBe(200);
    return {
      consumerId: res.body.consumerId,
      bannedUntil: res.body.bannedUntil,
      minute: res.body.usage.minute.remaining,
      day: res.body.usage.day.remaining,
    };
  }

  const moves = {
    PATCH: async (id: string, to: string) => {
      expect((await adminRequest(product, 'patch', `/admin/keys/${id}`).send({ consumerId: to })).status).toBe(200);
    },
    import: async (id: string, to: string) => {
      const exported = await adminRequest(product, 'get', '/admin/keys/export');
      expect(exported.status).toBe(200);
      const lines = exported.text.split('\n').filter((line) => line !== '');
      const moved = lines.map((line) => {
        const fields = JSON.parse(line) as Record<string, unknown>;
        return fields.id === id ? JSON.stringify({ ...fields, consumerId: to }) : line;
      });
      expect(moved).not.toEqual(lines);
      const imported = await adminRequest(product, 'post', '/admin/keys/import')
        .set('Content-Type', 'application/x-ndjson')
        .send(moved.join('\n') + '\n');
      expect(imported.status).toBe(200);
      expect(imported.body.imported).toBe(1);
    },
  };

  it.each(['PATCH', 'import'] as const)('by %s: its used units in each window and its ban are kept', async (how) => {
    const from = await consumer('From');
    const to = await consumer('To');
    const key = await bannedKey(from);
    const before = await keyState(key.id);
    expect(before).toEqual({
      consumerId: from,
      bannedUntil: new Date(MID_MINUTE + 900_000).toISOString(),
      minute: 0,
      day: KEY_LIMITS.perDay - KEY_LIMITS.perMinute,
    });

    await moves[how](key.id, to);

    expect(await keyState(key.id)).toEqual({ ...before, consumerId: to });
    expectError(await gatewayGet(product, key.key), 429, 'temporarily_banned');
    // The ban is the one it had: no unban happened, so the audit has none for the key.
    const audit = await adminRequest(product, 'get', '/admin/audit?limit=50');
    expect(
      (audit.body.entries as Array<{ action: string; keyId: string }>).filter(
        (e) => e.keyId === key.id && e.action === 'unban',
      ),
    ).toEqual([]);
  });
});
