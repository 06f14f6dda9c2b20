import { ApiError } from '../../../src/shared/errors';
import { validLimits } from '../../../src/keys/key-validation';
import { decodeRecord, encodeRecord } from '../../../src/keys/record-changes';
import { normalisedLimits } from '../../../src/keys/stores/key-record-fields';
import { decodeConsumer, encodeConsumer } from '../../../src/consumers/consumer-record';
import type { ApiKeyRecord } from '../../../src/keys/types';

/** A key's and a consumer's `limits.hiddenWindows` as records hold them (CONTRACT §4): checked, canonical, kept. */

const record: ApiKeyRecord = {
  id: 'key_0123456789abcdef01234567',
  name: 'k',
  plan: 'pro',
  limits: normalisedLimits({ perMinute: 5, perDay: 50, hiddenWindows: ['day', 'minute'] }),
  hash: 'a'.repeat(64),
  createdAt: '2026-03-01T00:00:00.000Z',
  updatedAt: '2026-03-01T00:00:00.000Z',
  revokedAt: null,
  expiresAt: null,
  previousHash: null,
  previousKeyExpiresAt: null,
};

test('a key record keeps its hidden windows in canonical order through its encoding; an empty list stays empty', () => {
  expect(decodeRecord(encodeRecord(record)).limits).toEqual({
    perMinute: 5,
    perDay: 50,
    hiddenWindows: ['minute', 'day'],
  });
  const cleared = { ...record, limits: normalisedLimits({ perMinute: 5, perDay: 50, hiddenWindows: [] }) };
  expect(decodeRecord(encodeRecord(cleared)).limits).toEqual({ perMinute: 5, perDay: 50, hiddenWindows: [] });
  expect(
    decodeRecord(encodeRecord({ ...record, limits: normalisedLimits({ perMinute: 5, perDay: 50 }) })).limits,
  ).not.toHaveProperty('hiddenWindows');
});

test('a stored key whose hidden windows are not window names is a corrupt record', () => {
  const text = encodeRecord(record).replace('"minute"', '"hour"');
  expect(() => decodeRecord(text)).toThrow('corrupt key record: limits');
});

test('validLimits (admin API and import alike) refuses what is not a list of window names, with 400', () => {
  expect(validLimits({ perMinute: 5, perDay: 50, hiddenWindows: ['month', 'month'] }, 1)).toEqual({
    perMinute: 5,
    perDay: 50,
    hiddenWindows: ['month'],
  });
  for (const hiddenWindows of [['hour'], 'minute', [null], {}]) {
    let thrown: unknown;
    try {
      validLimits({ perMinute: 5, perDay: 50, hiddenWindows }, 1);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({
      status: 400,
      message: 'limits.hiddenWindows must be a list of window names: minute, day, month.',
    });
  }
});

test('a consumer keeps a list that hides something, in canonical order; a bad one is a corrupt record', () => {
  const consumer = {
    id: 'con_0123456789abcdef01234567',
    name: 'c',
    limits: { perMinute: 5, hiddenWindows: ['month' as const, 'minute' as const] },
    billingDay: 1,
    allowedOperations: null,
    allowedAddresses: null,
    createdAt: 'x',
    updatedAt: 'x',
  };
  expect(decodeConsumer(encodeConsumer(consumer)).limits).toEqual({ perMinute: 5, hiddenWindows: ['minute', 'month'] });
  expect(decodeConsumer(encodeConsumer({ ...consumer, limits: { perMinute: 5, hiddenWindows: [] } })).limits).toEqual({
    perMinute: 5,
  });
  expect(() => decodeConsumer(encodeConsumer(consumer).replace('"month"', '"week"'))).toThrow(
    'corrupt consumer record: limits',
  );
});
