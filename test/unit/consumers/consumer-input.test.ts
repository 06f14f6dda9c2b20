import { consumerCreateSchema, consumerLineSchema, consumerUpdateSchema } from '../../../src/consumers/consumer-input';
import { encodeConsumer } from '../../../src/consumers/consumer-record';
import { consumerRecord } from './consumer-kit';

/**
 * The shapes a consumer is written in (src/consumers/consumer-input.ts): the admin API's bodies and
 * a backup's consumer lines. What each refuses, and the path the 400 names.
 */

/** The path of the first issue, or 'ok'. */
function firstIssue(
  schema: { safeParse(v: unknown): { success: boolean; error?: { issues: { path: PropertyKey[] }[] } } },
  value: unknown,
) {
  const result = schema.safeParse(value);
  return result.success ? 'ok' : result.error!.issues[0]!.path.map(String).join('.') || '(root)';
}

test('a create needs a name and nothing else; every other field may be null or absent', () => {
  expect(firstIssue(consumerCreateSchema, { name: 'Acme' })).toBe('ok');
  expect(
    firstIssue(consumerCreateSchema, {
      name: 'Acme',
      limits: null,
      billingDay: null,
      allowedOperations: null,
      allowedAddresses: null,
    }),
  ).toBe('ok');
  expect(firstIssue(consumerCreateSchema, {})).toBe('name');
  expect(firstIssue(consumerUpdateSchema, {})).toBe('ok');
});

test.each([
  [{ name: 'a', plan: 'pro' }, '(root)'],
  [{ name: 'a', limits: { perHour: 5 } }, 'limits'],
  [{ name: 'a', limits: { perMinute: 0 } }, 'limits.perMinute'],
  [{ name: 'a', limits: { perDay: 2.5 } }, 'limits.perDay'],
  [{ name: 'a', limits: { perMonth: Number.MAX_SAFE_INTEGER + 1 } }, 'limits.perMonth'],
  [{ name: 'a', limits: { hiddenWindows: ['week'] } }, 'limits.hiddenWindows.0'],
  [{ name: 'a', limits: { hiddenWindows: ['minute', 'day', 'month', 'day'] } }, 'limits.hiddenWindows'],
  [{ name: 'a', billingDay: 0 }, 'billingDay'],
  [{ name: 'a', billingDay: 29 }, 'billingDay'],
  [{ name: 'a', billingDay: 1.5 }, 'billingDay'],
  [{ name: 'a', allowedOperations: [''] }, 'allowedOperations.0'],
  [{ name: 'a', allowedAddresses: ['x'.repeat(101)] }, 'allowedAddresses.0'],
  [{ name: 'a', allowedAddresses: Array(1001).fill('10.0.0.1') }, 'allowedAddresses'],
  [{ name: 'a', allowedOperations: 'GET /v1/pets' }, 'allowedOperations'],
])('create %j is refused at %s', (body, path) => {
  expect(firstIssue(consumerCreateSchema, body)).toBe(path);
  // A PATCH refuses the same fields alike.
  expect(firstIssue(consumerUpdateSchema, body)).toBe(path);
});

test('the bounds themselves are accepted', () => {
  expect(
    firstIssue(consumerCreateSchema, {
      name: 'a',
      limits: { perMinute: 1, perMonth: Number.MAX_SAFE_INTEGER, hiddenWindows: ['minute', 'day', 'month'] },
      billingDay: 28,
      allowedOperations: Array(1000).fill('x'.repeat(100)),
    }),
  ).toBe('ok');
});

test('a backup line carries every field the export writes, and no other', () => {
  const line = JSON.parse(encodeConsumer(consumerRecord({ limits: { perDay: 5 } }))) as Record<string, unknown>;
  expect(firstIssue(consumerLineSchema, line)).toBe('ok');
  for (const field of ['id', 'name', 'limits', 'billingDay', 'createdAt', 'updatedAt']) {
    const { [field]: _gone, ...rest } = line;
    expect([field, firstIssue(consumerLineSchema, rest)]).toEqual([field, field]);
  }
  expect(firstIssue(consumerLineSchema, { ...line, plan: 'pro' })).toBe('(root)');
  // A line's limits and billing day are not nullable: the export writes them.
  expect(firstIssue(consumerLineSchema, { ...line, limits: null })).toBe('limits');
  expect(firstIssue(consumerLineSchema, { ...line, billingDay: null })).toBe('billingDay');
  const badId = consumerLineSchema.safeParse({ ...line, id: 'con_123' });
  expect(badId.success ? null : badId.error.issues[0]!.message).toBe('must be con_ and 24 hex digits');
});
