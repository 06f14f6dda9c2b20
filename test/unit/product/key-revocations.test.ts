import { ManualClock } from '../../../src/shared/clock';
import { createLogger } from '../../../src/shared/logger';
import { generateApiKey, generateLegacyApiKey, hashApiKey } from '../../../src/keys/key-format';
import type { AuditEntry, AuditLog } from '../../../src/admin/audit-log';
import type { ApiKeyRecord } from '../../../src/keys/types';
import type { RevokedBy } from '../../../src/notifications/events';
import { KeyRevocations } from '../../../src/product/key-revocations';
import { keyRecordFixture } from '../../support/key-record';

const PREFIX = 'asg_test_';
const NOW = Date.parse('2026-06-01T12:00:00.000Z');

/** A key store of records by id, both secrets looked up, revocation keeping its first instant. */
class Records {
  readonly byId = new Map<string, ApiKeyRecord>();
  lookups = 0;
  revocations = 0;

  add(record: ApiKeyRecord): void {
    this.byId.set(record.id, record);
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | null> {
    this.lookups++;
    for (const record of this.byId.values()) if (record.hash === hash || record.previousHash === hash) return record;
    return null;
  }

  async revoke(id: string, at: string): Promise<ApiKeyRecord | null> {
    this.revocations++;
    const record = this.byId.get(id);
    if (!record) return null;
    const revoked = { ...record, revokedAt: record.revokedAt ?? at };
    this.byId.set(id, revoked);
    return revoked;
  }
}

function setup(trailFails = false) {
  const clock = new ManualClock(NOW);
  const records = new Records();
  const entries: AuditEntry[] = [];
  const auditLog: AuditLog = {
    append: async (entry) => {
      if (trailFails) throw new Error('the trail cannot be reached');
      entries.push(entry);
    },
    recent: async () => entries,
  };
  const announced: Array<{ keyId: string; by: RevokedBy }> = [];
  const revocations = new KeyRevocations({
    prefix: PREFIX,
    revoke: (id) => records.revoke(id, new Date(clock.now()).toISOString()),
    findByHash: (hash) => records.findByHash(hash),
    auditLog,
    announce: (record, by) => announced.push({ keyId: record.id, by }),
    clock,
    logger: createLogger('silent'),
  });
  return { clock, records, entries, announced, revocations };
}

const REPORT = { type: 'animal_store_api_key', url: 'https://github.com/o/r/blob/x/a.js', source: 'content' };

describe('KeyRevocations.revokeReported (secret scanning)', () => {
  it('revokes a key that works, audits it by secret-scanning and announces it; a second report changes nothing', async () => {
    const { records, entries, announced, revocations } = setup();
    const key = generateApiKey(PREFIX);
    records.add(keyRecordFixture({ id: 'key_000000000000000000000001', hash: hashApiKey(key) }));

    expect(await revocations.revokeReported(key, REPORT)).toBe(true);
    expect(records.byId.get('key_000000000000000000000001')!.revokedAt).toBe(new Date(NOW).toISOString());
    expect(entries).toEqual([
      {
        at: new Date(NOW).toISOString(),
        action: 'revoke',
        keyId: 'key_000000000000000000000001',
        details: {
          revokedAt: new Date(NOW).toISOString(),
          by: 'secret-scanning',
          tokenType: REPORT.type,
          url: REPORT.url,
          source: REPORT.source,
        },
      },
    ]);
    expect(announced).toEqual([{ keyId: 'key_000000000000000000000001', by: 'secret-scanning' }]);

    expect(await revocations.revokeReported(key, REPORT)).toBe(true);
    expect({ revocations: records.revocations, entries: entries.length, announced: announced.length }).toEqual({
      revocations: 1,
      entries: 1,
      announced: 1,
    });
  });

  it('a previous secret still in its grace period revokes the key; one past it is ours but leaves the key alone', async () => {
    const { clock, records, revocations } = setup();
    const previous = generateApiKey(PREFIX);
    const graceEnds = new Date(NOW + 60_000).toISOString();
    records.add(
      keyRecordFixture({
        id: 'key_000000000000000000000002',
        hash: hashApiKey(generateApiKey(PREFIX)),
        previousHash: hashApiKey(previous),
        previousKeyExpiresAt: graceEnds,
      }),
    );
    const other = generateApiKey(PREFIX);
    records.add(
      keyRecordFixture({
        id: 'key_000000000000000000000003',
        hash: hashApiKey(generateApiKey(PREFIX)),
        previousHash: hashApiKey(other),
        previousKeyExpiresAt: graceEnds,
      }),
    );

    expect(await revocations.revokeReported(previous, REPORT)).toBe(true);
    expect(records.byId.get('key_000000000000000000000002')!.revokedAt).not.toBeNull();

    clock.advance(60_000);
    expect(await revocations.revokeReported(other, REPORT)).toBe(true);
    expect(records.byId.get('key_000000000000000000000003')!.revokedAt).toBeNull();
  });

  it('a key issued before checksums is found and revoked like any other', async () => {
    const { records, revocations } = setup();
    const legacy = generateLegacyApiKey(PREFIX);
    records.add(keyRecordFixture({ id: 'key_000000000000000000000004', hash: hashApiKey(legacy) }));
    expect(await revocations.revokeReported(legacy, REPORT)).toBe(true);
    expect(records.byId.get('key_000000000000000000000004')!.revokedAt).not.toBeNull();
  });

  it('another environment, a failing checksum or garbage: false_positive without a store lookup; an unknown key after one', async () => {
    const { records, revocations } = setup();
    const key = generateApiKey(PREFIX);
    for (const token of [
      generateApiKey('asg_live_'),
      key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a'),
      'hello',
      '',
    ]) {
      expect(await revocations.revokeReported(token, REPORT)).toBe(false);
    }
    expect(records.lookups).toBe(0);
    expect(await revocations.revokeReported(key, REPORT)).toBe(false);
    expect({ lookups: records.lookups, revocations: records.revocations }).toEqual({ lookups: 1, revocations: 0 });
  });
});

describe('KeyRevocations.revokeOwn (POST /v1/keys/revoke)', () => {
  it('revokes the caller key, audits it by holder with its address and request, and announces it', async () => {
    const { records, entries, announced, revocations } = setup();
    const record = keyRecordFixture({ id: 'key_000000000000000000000005', consumerId: 'con_000000000000000000000001' });
    records.add(record);
    await revocations.revokeOwn(record, { requestId: 'req-1', clientAddress: '203.0.113.7' });
    expect(entries[0]!.details).toEqual({
      revokedAt: new Date(NOW).toISOString(),
      by: 'holder',
      clientAddress: '203.0.113.7',
      requestId: 'req-1',
    });
    expect(announced).toEqual([{ keyId: record.id, by: 'holder' }]);
  });

  it('a trail that cannot be reached does not undo or fail the revocation, nor its webhook', async () => {
    const { records, announced, revocations } = setup(true);
    const record = keyRecordFixture({ id: 'key_000000000000000000000006' });
    records.add(record);
    await expect(
      revocations.revokeOwn(record, { requestId: 'req-2', clientAddress: '203.0.113.8' }),
    ).resolves.toBeUndefined();
    expect(records.byId.get(record.id)!.revokedAt).not.toBeNull();
    expect(announced).toEqual([{ keyId: record.id, by: 'holder' }]);
  });
});
