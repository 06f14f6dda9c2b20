import { ManualClock } from '../../../src/shared/clock';
import { dayOf, type UsageDay } from '../../../src/usage/key-activity';
import { EXPORT_BATCH_KEYS, usageExportLines, type UsageExportSources } from '../../../src/usage/usage-export';

const NOW = Date.UTC(2026, 2, 10, 12);
const TODAY = dayOf(NOW);

function day(keyId: string, d: number, counts: Partial<UsageDay> = {}): UsageDay {
  return { keyId, day: d, admitted: 0, rateLimited: 0, banned: 0, units: 0, dayCount: 0, ...counts };
}

async function exportOf(
  sources: Partial<UsageExportSources> & Pick<UsageExportSources, 'keys'>,
  firstDay: number,
  lastDay: number,
  stored: UsageDay[] = [],
) {
  const flushed: string[] = [];
  const full: UsageExportSources = {
    history: {
      flush: async () => void flushed.push('flush'),
      usageDays: async (ids, first, last) =>
        stored.filter((d) => ids.includes(d.keyId) && d.day >= first && d.day <= last),
    },
    unitsToday: async () => null,
    clock: new ManualClock(NOW),
    ...sources,
  };
  const chunks: string[] = [];
  for await (const chunk of usageExportLines(full, firstDay, lastDay)) chunks.push(chunk);
  return {
    lines: chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>),
    chunks,
    flushed,
  };
}

test('key by key (by id), each key days oldest first; keys and days without traffic have no line', async () => {
  const stored = [
    day('key_b', TODAY - 1, { admitted: 2, units: 2, dayCount: 2 }),
    day('key_a', TODAY, { admitted: 1, units: 3, dayCount: 3 }),
    day('key_a', TODAY - 2, { rateLimited: 4 }),
  ];
  const { lines, flushed } = await exportOf(
    { keys: async () => [{ id: 'key_b' }, { id: 'key_c' }, { id: 'key_a' }] },
    TODAY - 2,
    TODAY,
    stored,
  );
  expect(flushed).toEqual(['flush']);
  expect(lines).toEqual([
    { date: '2026-03-08', keyId: 'key_a', consumerId: null, admitted: 0, units: 0, rateLimited: 4, banned: 0 },
    { date: '2026-03-10', keyId: 'key_a', consumerId: null, admitted: 1, units: 3, rateLimited: 0, banned: 0 },
    { date: '2026-03-09', keyId: 'key_b', consumerId: null, admitted: 2, units: 2, rateLimited: 0, banned: 0 },
  ]);
});

test("units: the most any source knows the window counted, the added units, the window's highest reported count, and today the window itself", async () => {
  const stored = [
    // A process died before its flush: its units were lost, a later request's count was kept.
    day('key_a', TODAY - 1, { admitted: 5, units: 5, dayCount: 8 }),
    // The window restarted (a Redis that lost its data): the units added are more than its count.
    day('key_a', TODAY - 2, { admitted: 9, units: 9, dayCount: 4 }),
    day('key_a', TODAY, { admitted: 2, units: 2, dayCount: 2 }),
  ];
  const { lines } = await exportOf(
    { keys: async () => [{ id: 'key_a' }], unitsToday: async () => 6 },
    TODAY - 2,
    TODAY,
    stored,
  );
  expect(lines.map((l) => [l.date, l.units])).toEqual([
    ['2026-03-08', 9],
    ['2026-03-09', 8],
    ['2026-03-10', 6],
  ]);
});

test("today's units come from the window even when the history has nothing of the key (its only instance died before a flush)", async () => {
  const { lines } = await exportOf(
    { keys: async () => [{ id: 'key_a' }, { id: 'key_b' }], unitsToday: async (id) => (id === 'key_a' ? 7 : 0) },
    TODAY - 1,
    TODAY,
  );
  expect(lines).toEqual([
    { date: '2026-03-10', keyId: 'key_a', consumerId: null, admitted: 0, units: 7, rateLimited: 0, banned: 0 },
  ]);
});

test('the window is not asked when the range ends before today, and a window that cannot answer leaves the history as it is', async () => {
  const asked: string[] = [];
  await exportOf(
    { keys: async () => [{ id: 'key_a' }], unitsToday: async (id) => asked.push(id) },
    TODAY - 5,
    TODAY - 1,
  );
  expect(asked).toEqual([]);
  const { lines } = await exportOf(
    { keys: async () => [{ id: 'key_a' }], unitsToday: async () => Promise.reject(new Error('store down')) },
    TODAY,
    TODAY,
    [day('key_a', TODAY, { admitted: 1, units: 1, dayCount: 1 })],
  );
  expect(lines.map((l) => l.units)).toEqual([1]);
});

test("a key's consumer is named; lines come in one chunk per batch of keys", async () => {
  const keys = Array.from({ length: EXPORT_BATCH_KEYS + 1 }, (_, i) => ({
    id: `key_${String(i).padStart(4, '0')}`,
    consumerId: i === 0 ? 'con_1' : null,
  }));
  const stored = keys.map((k) => day(k.id, TODAY, { admitted: 1, units: 1, dayCount: 1 }));
  const { lines, chunks } = await exportOf({ keys: async () => keys }, TODAY, TODAY, stored);
  expect(chunks).toHaveLength(2);
  expect(lines).toHaveLength(EXPORT_BATCH_KEYS + 1);
  expect(lines[0]!.consumerId).toBe('con_1');
});
