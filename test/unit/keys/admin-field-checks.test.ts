import { ManualClock } from '../../../src/shared/clock';
import { ApiError } from '../../../src/shared/errors';
import { KeyService } from '../../../src/keys/key-service';
import { ADMIN_FIELD_CHECKS, type AdminWrite } from '../../../src/keys/key-validation';
import { RECORD_FIELDS } from '../../../src/keys/stores/key-record-fields';
import { SqliteKeyStore } from '../../../src/keys/stores/sqlite-key-store';
import type { Plans } from '../../../src/limits/plan-limits';
import type { NewKeyInput } from '../../../src/keys/types';

/**
 * KeyService.create and update derive the record and the patch from ADMIN_FIELD_CHECKS
 * (src/keys/key-validation.ts), one check per field an admin write may set, and the record's
 * encoding (src/keys/stores/key-record-fields.ts): no field is copied by hand in between. The
 * rules each check holds: test/unit/keys/key-service.test.ts and the admin suites.
 */

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const CONSUMER = 'con_' + 'c'.repeat(24);
const plans: Plans = { free: { perMinute: 60, perDay: 1000 }, enterprise: {} };

/** A value for every field an admin write may set, none at its default. */
const EVERY_FIELD: Required<NewKeyInput> = {
  name: 'every field',
  plan: 'free',
  limits: { perMinute: 5, perDay: 50, perMonth: 500, shadow: true, maxInFlight: 3, hiddenWindows: ['day'] },
  billingDay: 15,
  expiresAt: '2030-01-31T00:00:00Z',
  consumerId: CONSUMER,
  allowedOperations: ['getPet', 'listPets'],
  allowedAddresses: ['192.0.2.7', '10.0.0.0/8'],
};

let store: SqliteKeyStore;
let service: KeyService;
const write: AdminWrite = {
  plans,
  largestCost: 1,
  now: NOW,
  consumerExists: async (id) => id === CONSUMER,
};

beforeEach(() => {
  store = new SqliteKeyStore({ dataDir: null });
  service = new KeyService({
    store,
    prefix: 'asg_dev_',
    plans: () => plans,
    clock: new ManualClock(NOW),
    consumerExists: write.consumerExists!,
  });
});

afterEach(async () => {
  await store.close();
});

async function refusal(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return (err as ApiError).message;
}

test('every field an admin write may set is a field of the record table, so its encoding keeps it', () => {
  const encoded = new Set<string>(RECORD_FIELDS.map((field) => field.name));
  expect(Object.keys(ADMIN_FIELD_CHECKS).filter((field) => !encoded.has(field))).toEqual([]);
});

test('a create stores each field as its check gives it, and its default where the input leaves it out', async () => {
  const { record } = await service.create(EVERY_FIELD);
  for (const [field, entry] of Object.entries(ADMIN_FIELD_CHECKS)) {
    const value = await entry.check(EVERY_FIELD[field as keyof NewKeyInput], write);
    expect({ [field]: record[field as keyof typeof record] }).toEqual({ [field]: value });
  }
  expect(await store.get(record.id)).toEqual(record);

  const { record: bare } = await service.create({ name: 'bare', plan: 'free' });
  // null for the fields the record always carries, absent for those it carries only when set.
  expect(bare).toMatchObject({ limits: null, expiresAt: null });
  for (const field of ['billingDay', 'consumerId', 'allowedOperations', 'allowedAddresses'])
    expect(bare).not.toHaveProperty(field);
  expect(await store.get(bare.id)).toEqual(bare);
});

test('a PATCH changes each field it names as its check gives it; a field set at creation only is not patched', async () => {
  const { record } = await service.create({ name: 'bare', plan: 'free' });
  const patchable = Object.entries(ADMIN_FIELD_CHECKS).filter(([, entry]) => !entry.createOnly);
  expect(patchable.map(([field]) => field)).not.toContain('billingDay');
  const updated = await service.update(record.id, EVERY_FIELD);
  for (const [field, entry] of patchable) {
    const value = await entry.check(EVERY_FIELD[field as keyof NewKeyInput], write);
    expect({ [field]: updated![field as keyof typeof updated] }).toEqual({ [field]: value });
  }
  expect(updated).not.toHaveProperty('billingDay');

  // null removes what a field holds (every field whose check takes null): its default again.
  const removable: string[] = [];
  for (const [field, entry] of patchable) {
    const takesNull = await (async () => entry.check(null, write))().then(
      (value) => value === null,
      () => false,
    );
    if (takesNull) removable.push(field);
  }
  expect(removable).toEqual(expect.arrayContaining(['limits', 'expiresAt', 'consumerId']));
  const cleared = await service.update(record.id, Object.fromEntries(removable.map((field) => [field, null])));
  expect(cleared).toEqual({ ...record, updatedAt: cleared!.updatedAt, name: EVERY_FIELD.name, plan: EVERY_FIELD.plan });
});

test('the first bad field in the checks’ order is the 400; a create without limits on a plan without any is told before later fields', async () => {
  expect(await refusal(service.create({ name: 7, plan: 'gold' } as never))).toBe('name must be a string.');
  expect(await refusal(service.create({ name: 'k', plan: 'gold' }))).toBe('plan must be one of free, enterprise.');
  expect(await refusal(service.create({ name: 'k', plan: 'enterprise', billingDay: 40 }))).toMatch(
    /^plan enterprise has no limits of its own/,
  );
  expect(await refusal(service.create({ name: 'k', plan: 'free', billingDay: 40, expiresAt: 'soon' }))).toMatch(
    /^billingDay must be/,
  );
  expect(await refusal(service.create({ name: 'k', plan: 'free', consumerId: 'con_x', allowedOperations: [] }))).toBe(
    'consumerId: no consumer with id con_x.',
  );
});

test('a PATCH is checked before the key is looked up: a bad one is a 400 for an unknown id too, a good one null', async () => {
  const unknown = 'key_' + 'f'.repeat(24);
  expect(await refusal(service.update(unknown, { expiresAt: '2020-01-01T00:00:00Z' }))).toBe(
    'expiresAt must be in the future.',
  );
  expect(await service.update(unknown, { name: 'fine' })).toBeNull();
});
