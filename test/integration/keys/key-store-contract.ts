import { generateApiKey, generateKeyId, hashApiKey } from '../../../src/keys/key-format';
import { ConsumerClosed, type ApiKeyRecord, type KeyChange, type KeyStore } from '../../../src/keys/types';
import { keyRecordFixture } from '../../support/key-record';
import { eventually } from '../../support/eventually';

/** A record as the key service would build it, with the key it was hashed from. */
export function newRecord(overrides: Partial<ApiKeyRecord> = {}): { key: string; record: ApiKeyRecord } {
  const key = generateApiKey('asg_test_');
  const record = keyRecordFixture({
    id: generateKeyId(),
    name: 'billing service',
    plan: 'pro',
    hash: hashApiKey(key),
    ...overrides,
  });
  return { key, record };
}

/**
 * What every KeyStore must do, run against each implementation. `open` gives a fresh, empty store;
 * the suite closes it.
 */
export function describeKeyStoreContract(name: string, open: () => Promise<KeyStore>): void {
  describe(`${name}: KeyStore contract`, () => {
    let store: KeyStore;

    beforeEach(async () => {
      store = await open();
    });

    afterEach(async () => {
      await store.close();
    });

    it('finds an inserted record by hash and by id', async () => {
      const { record } = newRecord({ limits: { perMinute: 5, perDay: 50 } });
      await store.insert(record);
      expect(await store.findByHash(record.hash)).toEqual(record);
      expect(await store.get(record.id)).toEqual(record);
    });

    it('keeps a key’s shadow setting (true, false, or absent: follow the plan) through insert and update', async () => {
      const shadowed = newRecord({ limits: { perMinute: 5, perDay: 50, shadow: true } }).record;
      const enforced = newRecord({ limits: { perMinute: 5, perDay: 50, shadow: false } }).record;
      const plain = newRecord({ limits: { perMinute: 5, perDay: 50 } }).record;
      for (const record of [shadowed, enforced, plain]) await store.insert(record);
      for (const record of [shadowed, enforced, plain]) expect(await store.findByHash(record.hash)).toEqual(record);
      const updated = await store.update(
        plain.id,
        { limits: { perMinute: 6, perDay: 60, shadow: true } },
        '2026-01-02T00:00:00.000Z',
      );
      expect(updated?.limits).toEqual({ perMinute: 6, perDay: 60, shadow: true });
      expect((await store.get(plain.id))?.limits).toEqual({ perMinute: 6, perDay: 60, shadow: true });
    });

    it('keeps a key’s month quota and billing day through insert, update and rotation; the 1st is the default', async () => {
      const metered = { ...newRecord({ limits: { perMinute: 5, perDay: 50, perMonth: 500 } }).record, billingDay: 17 };
      const plain = newRecord({}).record;
      for (const record of [metered, plain]) await store.insert(record);
      expect(await store.findByHash(metered.hash)).toEqual(metered);
      expect((await store.get(plain.id))?.billingDay).toBeUndefined();
      const updated = await store.update(metered.id, { name: 'renamed' }, '2026-01-02T00:00:00.000Z');
      expect(updated).toMatchObject({ billingDay: 17, limits: { perMinute: 5, perDay: 50, perMonth: 500 } });
      await store.rotate(
        metered.id,
        { hash: 'f'.repeat(64), previousKeyExpiresAt: '2026-01-03T00:00:00.000Z' },
        '2026-01-02T00:00:00.000Z',
      );
      expect((await store.get(metered.id))?.billingDay).toBe(17);
    });

    it('answers null for an unknown hash or id', async () => {
      expect(await store.findByHash(hashApiKey('asg_test_nothing'))).toBeNull();
      expect(await store.get(generateKeyId())).toBeNull();
    });

    it('refuses a second record with the same id or the same hash', async () => {
      const { record } = newRecord();
      await store.insert(record);
      await expect(store.insert({ ...record, hash: hashApiKey('other') })).rejects.toThrow(/exists/);
      await expect(store.insert({ ...record, id: generateKeyId() })).rejects.toThrow(/exists/);
      expect(await store.list()).toEqual([record]);
    });

    it('lists every record oldest first', async () => {
      const later = newRecord({ createdAt: '2026-01-02T00:00:00.000Z', updatedAt: '2026-01-02T00:00:00.000Z' }).record;
      const earlier = newRecord({ createdAt: '2026-01-01T00:00:00.000Z' }).record;
      await store.insert(later);
      await store.insert(earlier);
      expect(await store.list()).toEqual([earlier, later]);
    });

    it('updates name, plan and limits, keeping absent fields', async () => {
      const { record } = newRecord();
      await store.insert(record);
      const renamed = await store.update(record.id, { name: 'renamed' }, '2026-01-03T00:00:00.000Z');
      expect(renamed).toEqual({ ...record, name: 'renamed', updatedAt: '2026-01-03T00:00:00.000Z' });

      const moved = await store.update(
        record.id,
        { plan: 'enterprise', limits: { perMinute: 9, perDay: 99 } },
        '2026-01-04T00:00:00.000Z',
      );
      expect(moved).toMatchObject({ name: 'renamed', plan: 'enterprise', limits: { perMinute: 9, perDay: 99 } });
      expect(await store.findByHash(record.hash)).toEqual(moved);

      const cleared = await store.update(record.id, { plan: 'pro', limits: null }, '2026-01-05T00:00:00.000Z');
      expect(cleared).toMatchObject({ plan: 'pro', limits: null, updatedAt: '2026-01-05T00:00:00.000Z' });
      expect(await store.get(record.id)).toEqual(cleared);
    });

    it('revokes once: a second revocation keeps the first instant', async () => {
      const { record } = newRecord();
      await store.insert(record);
      const revoked = await store.revoke(record.id, '2026-02-01T00:00:00.000Z');
      expect(revoked?.revokedAt).toBe('2026-02-01T00:00:00.000Z');
      const again = await store.revoke(record.id, '2026-03-01T00:00:00.000Z');
      expect(again?.revokedAt).toBe('2026-02-01T00:00:00.000Z');
      expect((await store.findByHash(record.hash))?.revokedAt).toBe('2026-02-01T00:00:00.000Z');
    });

    it('answers null when updating or revoking an unknown id', async () => {
      expect(await store.update(generateKeyId(), { name: 'x' }, '2026-01-01T00:00:00.000Z')).toBeNull();
      expect(await store.revoke(generateKeyId(), '2026-01-01T00:00:00.000Z')).toBeNull();
    });

    it('hands out copies: changing a returned record changes nothing stored', async () => {
      const { record } = newRecord({ limits: { perMinute: 1, perDay: 2 } });
      await store.insert(record);
      const copy = (await store.get(record.id))!;
      copy.name = 'tampered';
      copy.limits!.perDay = 1000;
      record.name = 'tampered too';
      expect(await store.findByHash(record.hash)).toMatchObject({
        name: 'billing service',
        limits: { perMinute: 1, perDay: 2 },
      });
    });

    it('rotation: the record resolves by its new and its previous hash, is listed once, and keeps both through an update', async () => {
      const { record } = newRecord();
      await store.insert(record);
      const newHash = hashApiKey('asg_test_second');
      const rotated = await store.rotate(
        record.id,
        { hash: newHash, previousKeyExpiresAt: '2026-01-02T00:00:00.000Z' },
        '2026-01-01T12:00:00.000Z',
      );
      const expected = {
        ...record,
        hash: newHash,
        previousHash: record.hash,
        previousKeyExpiresAt: '2026-01-02T00:00:00.000Z',
        updatedAt: '2026-01-01T12:00:00.000Z',
      };
      expect(rotated).toEqual(expected);
      expect(await store.findByHash(newHash)).toEqual(expected);
      expect(await store.findByHash(record.hash)).toEqual(expected);
      expect(await store.get(record.id)).toEqual(expected);
      expect(await store.list()).toEqual([expected]);

      const updated = await store.update(
        record.id,
        { expiresAt: '2027-01-01T00:00:00.000Z' },
        '2026-01-01T13:00:00.000Z',
      );
      expect(updated).toEqual({
        ...expected,
        expiresAt: '2027-01-01T00:00:00.000Z',
        updatedAt: '2026-01-01T13:00:00.000Z',
      });
      expect(await store.findByHash(record.hash)).toEqual(updated);
      expect(await store.findByHash(newHash)).toEqual(updated);
      expect((await store.update(record.id, { expiresAt: null }, '2026-01-01T14:00:00.000Z'))?.expiresAt).toBeNull();
    });

    it('rotation: a second rotation drops the oldest hash at once; revocation covers both hashes; a revoked record is not rotated', async () => {
      const { record } = newRecord();
      await store.insert(record);
      const second = hashApiKey('asg_test_second');
      const third = hashApiKey('asg_test_third');
      await store.rotate(
        record.id,
        { hash: second, previousKeyExpiresAt: '2026-01-02T00:00:00.000Z' },
        '2026-01-01T01:00:00.000Z',
      );
      const again = await store.rotate(
        record.id,
        { hash: third, previousKeyExpiresAt: '2026-01-03T00:00:00.000Z' },
        '2026-01-01T02:00:00.000Z',
      );
      expect(again).toMatchObject({
        hash: third,
        previousHash: second,
        previousKeyExpiresAt: '2026-01-03T00:00:00.000Z',
      });
      expect(await store.findByHash(record.hash)).toBeNull();
      expect((await store.findByHash(second))?.hash).toBe(third);

      const revoked = await store.revoke(record.id, '2026-01-01T03:00:00.000Z');
      expect((await store.findByHash(second))?.revokedAt).toBe('2026-01-01T03:00:00.000Z');
      expect((await store.findByHash(third))?.revokedAt).toBe('2026-01-01T03:00:00.000Z');
      const refused = await store.rotate(
        record.id,
        { hash: hashApiKey('asg_test_fourth'), previousKeyExpiresAt: '2026-01-04T00:00:00.000Z' },
        '2026-01-01T04:00:00.000Z',
      );
      expect(refused).toEqual(revoked);
      expect(await store.findByHash(hashApiKey('asg_test_fourth'))).toBeNull();
      expect(
        await store.rotate(
          generateKeyId(),
          { hash: hashApiKey('asg_test_fifth'), previousKeyExpiresAt: '2026-01-04T00:00:00.000Z' },
          '2026-01-01T04:00:00.000Z',
        ),
      ).toBeNull();
    });

    it('rotation: refuses a hash another key has, and changes nothing', async () => {
      const a = newRecord().record;
      const b = newRecord().record;
      await store.insert(a);
      await store.insert(b);
      await expect(
        store.rotate(
          a.id,
          { hash: b.hash, previousKeyExpiresAt: '2026-01-02T00:00:00.000Z' },
          '2026-01-01T01:00:00.000Z',
        ),
      ).rejects.toThrow(/exists/);
      expect(await store.get(a.id)).toEqual(a);
      expect(await store.findByHash(b.hash)).toEqual(b);
    });

    it('rotation: tells listeners about each hash it touches', async () => {
      const { record } = newRecord();
      await store.insert(record);
      const second = hashApiKey('asg_test_second');
      const third = hashApiKey('asg_test_third');
      await store.rotate(
        record.id,
        { hash: second, previousKeyExpiresAt: '2026-01-02T00:00:00.000Z' },
        '2026-01-01T01:00:00.000Z',
      );
      const changes: KeyChange[] = [];
      const off = store.onChange((change) => changes.push(change));
      await store.rotate(
        record.id,
        { hash: third, previousKeyExpiresAt: '2026-01-03T00:00:00.000Z' },
        '2026-01-01T02:00:00.000Z',
      );
      await eventually(() => [record.hash, second, third].every((h) => changes.some((c) => c.hash === h)), {
        timeoutMs: 2000,
        what: 'a change per hash',
      });
      off();
      expect(changes.every((c) => c.id === record.id)).toBe(true);
    });

    it('tells listeners about every insert, update and revocation, until they unsubscribe', async () => {
      const changes: KeyChange[] = [];
      const off = store.onChange((change) => changes.push(change));
      const { record } = newRecord();
      await store.insert(record);
      await store.update(record.id, { name: 'n' }, '2026-01-02T00:00:00.000Z');
      await store.revoke(record.id, '2026-01-03T00:00:00.000Z');
      const expected = { id: record.id, hash: record.hash };
      await eventually(() => changes.length >= 3, { timeoutMs: 2000, what: 'three changes' });
      expect(changes.every((c) => c.id === expected.id && c.hash === expected.hash)).toBe(true);

      off();
      const seen = changes.length;
      await store.update(record.id, { name: 'after' }, '2026-01-04T00:00:00.000Z');
      // Give a pub/sub echo the same chance to arrive that the first three had.
      const probe: KeyChange[] = [];
      const offProbe = store.onChange((c) => probe.push(c));
      await store.update(record.id, { name: 'probe' }, '2026-01-05T00:00:00.000Z');
      await eventually(() => probe.length >= 1, { timeoutMs: 2000, what: 'probe change' });
      offProbe();
      expect(changes.length).toBe(seen);
    });

    it('a consumer closed to keys refuses a key inserted in it or moved into it, in the write itself, until every holder reopened it or the hold ran out', async () => {
      const consumerId = 'con_' + 'c'.repeat(24);
      const inside = newRecord({ consumerId }).record;
      const outside = newRecord().record;
      for (const record of [inside, outside]) await store.insert(record);
      expect(await store.closeConsumer!(consumerId, 'one', 60_000)).toBe(false);
      expect(await store.closeConsumer!(consumerId, 'two', 60_000)).toBe(false);
      expect(await store.closeConsumer!(consumerId, 'one', 60_000)).toBe(true);

      const refused = newRecord({ consumerId }).record;
      await expect(store.insert(refused)).rejects.toEqual(new ConsumerClosed(consumerId));
      await expect(store.update(outside.id, { consumerId }, '2026-01-02T00:00:00.000Z')).rejects.toEqual(
        new ConsumerClosed(consumerId),
      );
      expect(await store.get(refused.id)).toBeNull();
      expect((await store.get(outside.id))?.consumerId).toBeUndefined();
      // A key already in it is not moved into it: it may still be renamed and revoked.
      expect(await store.update(inside.id, { name: 'renamed' }, '2026-01-02T00:00:00.000Z')).toMatchObject({
        name: 'renamed',
        consumerId,
      });
      expect((await store.revoke(inside.id, '2026-01-02T00:00:00.000Z'))?.revokedAt).toBe('2026-01-02T00:00:00.000Z');

      // One holder gone, the other still holds it; then it opens.
      await store.reopenConsumer!(consumerId, 'one');
      await expect(store.insert(refused)).rejects.toEqual(new ConsumerClosed(consumerId));
      await store.reopenConsumer!(consumerId, 'two');
      await store.insert(refused);
      expect((await store.update(outside.id, { consumerId }, '2026-01-02T00:00:00.000Z'))?.consumerId).toBe(consumerId);

      // A hold that runs out opens it too (a deletion that died half-way).
      const other = 'con_' + 'd'.repeat(24);
      await store.closeConsumer!(other, 'gone', 50);
      await expect(store.insert(newRecord({ consumerId: other }).record)).rejects.toEqual(new ConsumerClosed(other));
      const later = newRecord({ consumerId: other }).record;
      await eventually(
        async () =>
          store.insert(later).then(
            () => true,
            () => false,
          ),
        { timeoutMs: 5000, what: 'the hold to run out' },
      );
      expect(await store.closeConsumer!(other, 'gone', 60_000)).toBe(false);
    });

    it('an import bringing a live key into a consumer being deleted imports nothing; revoked keys and keys already there pass', async () => {
      const closed = 'con_' + 'f'.repeat(24);
      const already = newRecord({ consumerId: closed }).record;
      const outside = newRecord().record;
      for (const record of [already, outside]) await store.insert(record);
      await store.closeConsumer!(closed, 'deleting', 60_000);
      const fresh = newRecord({ consumerId: closed }).record;
      for (const entering of [fresh, { ...outside, consumerId: closed }]) {
        await expect(store.importRecords([{ ...already, name: 'renamed' }, entering])).rejects.toMatchObject({
          name: 'KeyImportConflict',
          message: expect.stringContaining(`consumer ${closed}, which is being deleted`),
        });
        expect(await store.get(already.id)).toEqual(already);
      }
      expect(await store.get(fresh.id)).toBeNull();
      const revoked = { ...newRecord({ consumerId: closed }).record, revokedAt: '2026-01-02T00:00:00.000Z' };
      expect((await store.importRecords([{ ...already, name: 'renamed' }, revoked])).imported).toBe(2);
      await store.reopenConsumer!(closed, 'deleting');
      expect((await store.importRecords([fresh])).imported).toBe(1);
    });

    it('an import tells which keys it moved to another consumer', async () => {
      const a = 'con_' + 'a'.repeat(24);
      const b = 'con_' + 'b'.repeat(24);
      const staying = newRecord({ consumerId: a }).record;
      const moving = newRecord({ consumerId: a }).record;
      const joining = newRecord().record;
      const leaving = newRecord({ consumerId: b }).record;
      for (const record of [staying, moving, joining, leaving]) await store.insert(record);
      const fresh = newRecord({ consumerId: b }).record;
      const { consumerId: _left, ...left } = leaving;
      const result = await store.importRecords([
        { ...staying, name: 'renamed' },
        { ...moving, consumerId: b },
        { ...joining, consumerId: a },
        left,
        fresh,
      ]);
      expect(result.imported).toBe(5);
      expect(result.moved).toEqual(
        expect.arrayContaining([
          { id: moving.id, from: a, to: b },
          { id: joining.id, from: undefined, to: a },
          { id: leaving.id, from: b, to: undefined },
        ]),
      );
      expect(result.moved).toHaveLength(3);
      // Imported again: nothing changes, nothing moves.
      expect((await store.importRecords([{ ...moving, consumerId: b }])).moved ?? []).toEqual([]);
    });

    it('keeps a listener that throws from breaking the write or other listeners', async () => {
      const seen: KeyChange[] = [];
      store.onChange(() => {
        throw new Error('listener bug');
      });
      store.onChange((c) => seen.push(c));
      const { record } = newRecord();
      await expect(store.insert(record)).resolves.toBeUndefined();
      await eventually(() => seen.length >= 1, { timeoutMs: 2000, what: 'change' });
      expect(await store.get(record.id)).toEqual(record);
    });
  });
}
