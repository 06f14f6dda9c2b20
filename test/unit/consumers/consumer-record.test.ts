import {
  byCreation,
  consumerLimitsOf,
  decodeConsumer,
  encodeConsumer,
  generateConsumerId,
  isConsumerId,
} from '../../../src/consumers/consumer-record';
import type { ConsumerRecord } from '../../../src/consumers/types';
import { consumerRecord } from './consumer-kit';

/**
 * A consumer's record (src/consumers/consumer-record.ts): its id, the one encoding both stores and
 * the durable copy compare, and what a stored value must be to be read back.
 */

test('a new consumer id is con_ and 24 hex digits, drawn at random', () => {
  const ids = Array.from({ length: 50 }, generateConsumerId);
  for (const id of ids) expect(isConsumerId(id)).toBe(true);
  expect(new Set(ids).size).toBe(50);
});

test.each([
  ['con_' + 'A'.repeat(24)],
  ['con_' + 'a'.repeat(23)],
  ['con_' + 'a'.repeat(25)],
  ['key_' + 'a'.repeat(24)],
  [' con_' + 'a'.repeat(24)],
  [42],
  [null],
])('%p is not a consumer id', (value) => {
  expect(isConsumerId(value)).toBe(false);
});

test('limits keep only the windows set, in one order, and a hidden list only when it hides something', () => {
  expect(JSON.stringify(consumerLimitsOf({ perMonth: 3, perMinute: 1, perDay: 2 }))).toBe(
    '{"perMinute":1,"perDay":2,"perMonth":3}',
  );
  expect(consumerLimitsOf(null)).toEqual({});
  expect(consumerLimitsOf(undefined)).toEqual({});
  expect(consumerLimitsOf({ perDay: 5, hiddenWindows: [] })).toEqual({ perDay: 5 });
  // Canonical order without repeats.
  expect(consumerLimitsOf({ hiddenWindows: ['month', 'minute', 'month'] })).toEqual({
    hiddenWindows: ['minute', 'month'],
  });
});

test('equal records encode alike whatever the order their fields and windows were given in', () => {
  const record = consumerRecord({ limits: { perDay: 10, perMinute: 2 }, allowedOperations: ['GET /v1/pets'] });
  const shuffled = Object.fromEntries(Object.entries(record).reverse()) as unknown as ConsumerRecord;
  shuffled.limits = { perMinute: 2, perDay: 10 };
  expect(encodeConsumer(shuffled)).toBe(encodeConsumer(record));
  expect(Object.keys(JSON.parse(encodeConsumer(record)) as object)).toEqual([
    'id',
    'name',
    'limits',
    'billingDay',
    'allowedOperations',
    'allowedAddresses',
    'createdAt',
    'updatedAt',
  ]);
});

test("what is encoded decodes to the same record, from the JSON or from an export line's fields", () => {
  const record = consumerRecord({
    limits: { perMinute: 5, perDay: 100, perMonth: 2_000, hiddenWindows: ['day'] },
    billingDay: 28,
    allowedOperations: ['GET /v1/pets'],
    allowedAddresses: ['10.0.0.0/8'],
  });
  expect(decodeConsumer(encodeConsumer(record))).toEqual(record);
  expect(decodeConsumer(JSON.parse(encodeConsumer(record)) as Record<string, unknown>)).toEqual(record);
  // Lists absent from an old record read as no list.
  const {
    allowedOperations: _o,
    allowedAddresses: _a,
    ...old
  } = JSON.parse(encodeConsumer(record)) as Record<string, unknown>;
  expect(decodeConsumer(old)).toMatchObject({ allowedOperations: null, allowedAddresses: null });
});

test.each([
  ['id', { id: 'con_short' }],
  ['id', { id: undefined }],
  ['name', { name: '' }],
  ['name', { name: 7 }],
  ['limits', { limits: { perMinute: 0 } }],
  ['limits', { limits: { perDay: 1.5 } }],
  ['limits', { limits: { perMonth: '10' } }],
  ['limits', { limits: { perDay: Number.MAX_SAFE_INTEGER + 2 } }],
  ['limits', { limits: { hiddenWindows: ['week'] } }],
  ['billingDay', { billingDay: 0 }],
  ['billingDay', { billingDay: 29 }],
  ['billingDay', { billingDay: undefined }],
  ['allowedOperations', { allowedOperations: 'GET /v1/pets' }],
  ['allowedAddresses', { allowedAddresses: [1] }],
  ['createdAt', { createdAt: '' }],
  ['updatedAt', { updatedAt: undefined }],
])('a stored value with a bad %s is refused, naming it', (field, change) => {
  const value = { ...(JSON.parse(encodeConsumer(consumerRecord())) as Record<string, unknown>), ...change };
  expect(() => decodeConsumer(JSON.stringify(value))).toThrow(`corrupt consumer record: ${field}`);
});

test('byCreation: oldest first, ties by id', () => {
  const a = consumerRecord({ id: 'con_' + 'b'.repeat(24), createdAt: '2026-03-01T00:00:00.000Z' });
  const b = consumerRecord({ id: 'con_' + 'a'.repeat(24), createdAt: '2026-03-01T00:00:00.000Z' });
  const c = consumerRecord({ id: 'con_' + '0'.repeat(24), createdAt: '2026-03-02T00:00:00.000Z' });
  expect([c, a, b].sort(byCreation).map((r) => r.id)).toEqual([b.id, a.id, c.id]);
  expect(byCreation(a, a)).toBe(0);
});
