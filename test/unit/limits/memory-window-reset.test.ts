import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ManualClock } from '../../../src/shared/clock';
import { MemoryKeyLimiter } from '../../../src/limits/memory-key-limiter';
import { SqliteMonthLedger } from '../../../src/limits/windows/sqlite-month-ledger';
import { NO_BAN } from './minute-window-behaviours';
import { describeWindowResetBehaviours } from './window-reset-behaviours';

describeWindowResetBehaviours('MemoryKeyLimiter', {
  create: (clock, ban, shape) => new MemoryKeyLimiter({ ban, clock, minuteWindow: shape, sweepIntervalMs: 0 }),
});

describe('MemoryKeyLimiter: a month reset outlives a restart', () => {
  it('the zero is on disk before the reset answers (months.sqlite), and the credits with it', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-reset-'));
    const clock = new ManualClock(Date.UTC(2026, 2, 15, 12));
    const limits = { perMinute: 100, perDay: 100, perMonth: 10 };
    const first = new SqliteMonthLedger(dataDir);
    // No timer: what the ledger holds after the reset was written by the reset itself.
    const before = new MemoryKeyLimiter({
      ban: NO_BAN,
      clock,
      monthLedger: first,
      monthFlushIntervalMs: 0,
      sweepIntervalMs: 0,
    });
    await before.addCredits({ keyId: 'key_m' }, 3);
    for (let i = 0; i < 4; i++) await before.consume({ keyId: 'key_m' }, limits);
    before.flushMonths();
    expect(await before.resetWindows({ keyId: 'key_m' }, ['month'])).toEqual({ month: 4 });
    // A crash: nothing flushed after the reset.
    first.close();
    const second = new SqliteMonthLedger(dataDir);
    const after = new MemoryKeyLimiter({
      ban: NO_BAN,
      clock,
      monthLedger: second,
      monthFlushIntervalMs: 0,
      sweepIntervalMs: 0,
    });
    try {
      expect((await after.usage({ keyId: 'key_m' }, limits)).month).toMatchObject({
        limit: 13,
        remaining: 13,
        credits: 3,
      });
    } finally {
      second.close();
    }
  });
});
