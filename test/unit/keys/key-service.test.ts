import { ManualClock } from '../../../src/shared/clock';
import { ApiError } from '../../../src/shared/errors';
import { generateKeyId, hashApiKey, isWellFormedKey } from '../../../src/keys/key-format';
import { KeyService } from '../../../src/keys/key-service';
import { effectiveLimits, planLimitsOf, type Plans } from '../../../src/limits/plan-limits';
import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import { withoutHash } from '../../../src/keys/record-changes';

const PREFIX = 'asg_dev_';
const plans: Plans = {
  free: { perMinute: 60, perDay: 1000 },
  pro: { perMinute: 300, perDay: 10000 },
  enterprise: {},
};

let clock: ManualClock;
let store: SqliteKeyStore;
let service: KeyService;

beforeEach(() => {
  clock = new ManualClock(Date.parse('2026-03-01T12:00:00.000Z'));
  store = new SqliteKeyStore({ dataDir: null });
  service = new KeyService({ store, prefix: PREFIX, plans: () => plans, clock });
});

afterEach(async () => {
  await store.close();
});

async function expectValidationError(promise: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  expect(err).toMatchObject({ code: 'validation_failed', status: 400 });
  expect((err as ApiError).message).toMatch(message);
}

describe('KeyService.create', () => {
  it('returns the only copy of the key and stores its hash', async () => {
    const { key, record } = await service.create({ name: '  shop frontend ', plan: 'free' });
    expect(isWellFormedKey(PREFIX, key)).toBe(true);
    expect(record).toEqual({
      id: expect.stringMatching(/^key_[0-9a-f]{24}$/),
      name: 'shop frontend',
      plan: 'free',
      limits: null,
      hash: hashApiKey(key),
      createdAt: '2026-03-01T12:00:00.000Z',
      updatedAt: '2026-03-01T12:00:00.000Z',
      revokedAt: null,
      expiresAt: null,
      previousHash: null,
      previousKeyExpiresAt: null,
    });
    expect(JSON.stringify(await store.list())).not.toContain(key);
    expect(await store.findByHash(hashApiKey(key))).toEqual(record);
  });

  it('keeps a limits override and an enterprise key with its own limits', async () => {
    const pro = await service.create({ name: 'p', plan: 'pro', limits: { perMinute: 5, perDay: 6 } });
    expect(pro.record.limits).toEqual({ perMinute: 5, perDay: 6 });
    const ent = await service.create({ name: 'e', plan: 'enterprise', limits: { perMinute: 5000, perDay: 1_000_000 } });
    expect(ent.record.limits).toEqual({ perMinute: 5000, perDay: 1_000_000 });
  });

  it.each([
    ['an unknown plan', { name: 'x', plan: 'platinum' }, /plan must be one of free, pro, enterprise/],
    ['a plan name from Object.prototype', { name: 'x', plan: 'toString' }, /plan must be one of/],
    ['enterprise without limits', { name: 'x', plan: 'enterprise' }, /must carry limits/],
    ['enterprise with limits null', { name: 'x', plan: 'enterprise', limits: null }, /must carry limits/],
    ['an empty name', { name: '', plan: 'free' }, /name must be 1 to 200 characters/],
    ['a blank name', { name: '   ', plan: 'free' }, /name must be 1 to 200 characters/],
    ['a 201-character name', { name: 'n'.repeat(201), plan: 'free' }, /name must be 1 to 200 characters/],
    ['a name that is not a string', { name: 42, plan: 'free' }, /name must be a string/],
    [
      'perMinute 0',
      { name: 'x', plan: 'free', limits: { perMinute: 0, perDay: 10 } },
      /limits.perMinute must be a positive integer/,
    ],
    [
      'a fractional perDay',
      { name: 'x', plan: 'free', limits: { perMinute: 1, perDay: 1.5 } },
      /limits.perDay must be a positive integer/,
    ],
    [
      'perDay as a string',
      { name: 'x', plan: 'free', limits: { perMinute: 1, perDay: '10' } },
      /limits.perDay must be a positive integer/,
    ],
    ['limits missing perDay', { name: 'x', plan: 'free', limits: { perMinute: 1 } }, /limits.perDay/],
    [
      'limits with an unknown field',
      { name: 'x', plan: 'free', limits: { perMinute: 1, perDay: 2, perHour: 3 } },
      /unknown field perHour/,
    ],
    ['limits that are not an object', { name: 'x', plan: 'free', limits: [1, 2] }, /limits must be an object/],
  ])('refuses %s with validation_failed', async (_label, input, message) => {
    await expectValidationError(service.create(input as never), message);
    expect(await store.list()).toEqual([]);
  });

  it('accepts a 200-character name', async () => {
    const { record } = await service.create({ name: 'n'.repeat(200), plan: 'free' });
    expect(record.name).toHaveLength(200);
  });
});

describe('KeyService.update', () => {
  it('changes name, plan and limits and stamps updatedAt', async () => {
    const { record } = await service.create({ name: 'a', plan: 'free' });
    clock.advance(1000);
    const updated = await service.update(record.id, { name: 'b', plan: 'pro', limits: { perMinute: 1, perDay: 2 } });
    expect(updated).toMatchObject({
      name: 'b',
      plan: 'pro',
      limits: { perMinute: 1, perDay: 2 },
      updatedAt: '2026-03-01T12:00:01.000Z',
    });
    expect(await service.get(record.id)).toEqual(updated);
  });

  it('drops the override with limits null, so the plan applies again', async () => {
    const { record } = await service.create({ name: 'a', plan: 'pro', limits: { perMinute: 1, perDay: 2 } });
    const updated = await service.update(record.id, { limits: null });
    expect(updated?.limits).toBeNull();
    expect(service.effectiveLimits(updated!)).toEqual({ perMinute: 300, perDay: 10000 });
  });

  it('moves a key to enterprise when the patch brings limits, or the key already has them', async () => {
    const a = await service.create({ name: 'a', plan: 'pro' });
    expect(
      (await service.update(a.record.id, { plan: 'enterprise', limits: { perMinute: 9, perDay: 99 } }))?.plan,
    ).toBe('enterprise');
    const b = await service.create({ name: 'b', plan: 'pro', limits: { perMinute: 9, perDay: 99 } });
    expect((await service.update(b.record.id, { plan: 'enterprise' }))?.plan).toBe('enterprise');
  });

  it('refuses to move a key without limits to enterprise', async () => {
    const { record } = await service.create({ name: 'a', plan: 'pro' });
    await expectValidationError(service.update(record.id, { plan: 'enterprise' }), /must carry limits/);
    expect((await service.get(record.id))?.plan).toBe('pro');
  });

  it('refuses to drop the limits of an enterprise key', async () => {
    const { record } = await service.create({ name: 'e', plan: 'enterprise', limits: { perMinute: 9, perDay: 99 } });
    await expectValidationError(service.update(record.id, { limits: null }), /must carry limits/);
    expect((await service.get(record.id))?.limits).toEqual({ perMinute: 9, perDay: 99 });
  });

  it.each([
    ['an unknown plan', { plan: 'gold' }, /plan must be one of/],
    ['an empty name', { name: '' }, /name must be 1 to 200 characters/],
    ['an over-long name', { name: 'x'.repeat(201) }, /name must be 1 to 200 characters/],
    ['bad limits', { limits: { perMinute: -1, perDay: 1 } }, /limits.perMinute/],
  ])('refuses %s with validation_failed', async (_label, patch, message) => {
    const { record } = await service.create({ name: 'a', plan: 'free' });
    await expectValidationError(service.update(record.id, patch as never), message);
    expect(await service.get(record.id)).toEqual(record);
  });

  it('answers null for an unknown id', async () => {
    expect(await service.update(generateKeyId(), { name: 'x' })).toBeNull();
  });
});

describe('KeyService.revoke, get and list', () => {
  it('revokes, and a second revocation keeps the first revokedAt', async () => {
    const { record } = await service.create({ name: 'a', plan: 'free' });
    clock.advance(60_000);
    const revoked = await service.revoke(record.id);
    expect(revoked?.revokedAt).toBe('2026-03-01T12:01:00.000Z');
    clock.advance(60_000);
    expect((await service.revoke(record.id))?.revokedAt).toBe('2026-03-01T12:01:00.000Z');
  });

  it('answers null for an unknown id', async () => {
    expect(await service.revoke(generateKeyId())).toBeNull();
    expect(await service.get(generateKeyId())).toBeNull();
  });

  it('lists every key; withoutHash gives what the admin API may show', async () => {
    const a = await service.create({ name: 'a', plan: 'free' });
    clock.advance(1);
    const b = await service.create({ name: 'b', plan: 'pro' });
    const listed = await service.list();
    expect(listed.map((r) => r.id)).toEqual([a.record.id, b.record.id]);
    const shown = listed.map(withoutHash);
    expect(shown[0]).not.toHaveProperty('hash');
    const { hash: _hash, previousHash: _previousHash, ...rest } = a.record;
    expect(shown[0]).toEqual(rest);
  });
});

describe('effectiveLimits', () => {
  it('takes the key’s own limits over the plan’s', () => {
    expect(effectiveLimits({ plan: 'free', limits: null }, plans)).toEqual({ perMinute: 60, perDay: 1000 });
    expect(effectiveLimits({ plan: 'free', limits: { perMinute: 2, perDay: 3 } }, plans)).toEqual({
      perMinute: 2,
      perDay: 3,
    });
    expect(effectiveLimits({ plan: 'enterprise', limits: { perMinute: 7, perDay: 8 } }, plans)).toEqual({
      perMinute: 7,
      perDay: 8,
    });
  });

  it('is null when neither the key nor its plan has limits (enterprise without, or a plan gone from config)', () => {
    expect(effectiveLimits({ plan: 'enterprise', limits: null }, plans)).toBeNull();
    expect(effectiveLimits({ plan: 'retired', limits: null }, plans)).toBeNull();
    expect(planLimitsOf(plans, 'constructor')).toBeNull();
  });
});
