import { ManualClock } from '../../../src/shared/clock';
import { MemoryKeyLimiter } from '../../../src/limits/memory-key-limiter';
import { FallbackKeyLimiter, StoreHealth, type FailMode } from '../../../src/limits/store-fallback';
import type { KeyDecision, KeyRef, WindowLimits } from '../../../src/limits/types';
import { KeyLimiterFake } from './key-limiter-fake';
import { DEFAULT_BAN } from './key-limiter-behaviours';
import { eventually } from '../../support/eventually';

// Pure logic: the "store" here is another in-process limiter that can be told to fail, standing in
// for Redis only to drive the fallback's rules. Real Redis outages: test/integration/reliability.

const limits: WindowLimits = { perMinute: 5, perDay: 3 };

/** A real MemoryKeyLimiter that throws while `down` is set, as a store call to a dead Redis does. */
class SwitchableStore extends KeyLimiterFake {
  down = false;
  calls = 0;
  constructor(readonly inner: MemoryKeyLimiter) {
    super();
  }
  override async consume(key: KeyRef, l: WindowLimits): Promise<KeyDecision> {
    this.calls += 1;
    if (this.down) throw new Error('store down');
    return this.inner.consume(key, l);
  }
  override usage = (key: KeyRef, l: WindowLimits) => this.inner.usage(key, l);
  override unban = (key: KeyRef) => this.inner.unban(key);
  override activeBans = () => this.inner.activeBans();
  override addCredits = (key: KeyRef, units: number, billingDay?: number) =>
    this.inner.addCredits(key, units, billingDay);
  override close = () => this.inner.close();
}

function setUp(mode: Exclude<FailMode, 'closed'>, ban = DEFAULT_BAN) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 30));
  const store = new SwitchableStore(new MemoryKeyLimiter({ ban, clock, sweepIntervalMs: 0 }));
  const events = { degraded: 0, recovered: 0, storeErrors: 0 };
  const health = new StoreHealth(
    async () => {
      if (store.down) throw new Error('still down');
    },
    1,
    { degraded: () => (events.degraded += 1), recovered: () => (events.recovered += 1) },
  );
  const limiter = new FallbackKeyLimiter(store, {
    mode,
    health,
    onStoreError: () => (events.storeErrors += 1),
    createFallback: () =>
      new MemoryKeyLimiter({
        ban: mode === 'open' ? { ...ban, threshold: Number.MAX_SAFE_INTEGER } : ban,
        clock,
        sweepIntervalMs: 0,
      }),
  });
  return { clock, store, events, health, limiter };
}

describe('FallbackKeyLimiter', () => {
  it('passes the store’s decisions through while it answers', async () => {
    const { limiter, store, events, health } = setUp('local');
    const decision = await limiter.consume({ keyId: 'k' }, limits);
    expect(decision).toMatchObject({ outcome: 'allowed' });
    expect(decision.fallback).toBeUndefined();
    expect(store.calls).toBe(1);
    expect(events).toEqual({ degraded: 0, recovered: 0, storeErrors: 0 });
    health.close();
  });

  it('local: one failure degrades; decisions come from the fallback without asking the store again until a probe succeeds', async () => {
    const { limiter, store, events, health } = setUp('local');
    store.down = true;
    const first = await limiter.consume({ keyId: 'k' }, limits);
    expect(first).toMatchObject({ outcome: 'allowed', fallback: 'local' });
    expect(events).toMatchObject({ degraded: 1, storeErrors: 1 });
    await limiter.consume({ keyId: 'k' }, limits);
    expect(store.calls).toBe(1);
    expect(health.degraded).toBe(true);

    store.down = false;
    await eventually(() => !health.degraded, { timeoutMs: 2000 });
    expect(events.recovered).toBe(1);
    await limiter.reset();
    const back = await limiter.consume({ keyId: 'k' }, limits);
    expect(back.fallback).toBeUndefined();
    expect(store.calls).toBe(2);
    health.close();
  });

  it('local: a key whose day the store had used up stays refused on the fallback', async () => {
    const { limiter, store, health } = setUp('local');
    for (let i = 0; i < 3; i++) expect((await limiter.consume({ keyId: 'k' }, limits)).outcome).toBe('allowed');
    store.down = true;
    const refused = await limiter.consume({ keyId: 'k' }, limits);
    expect(refused).toMatchObject({ outcome: 'limited', refusedBy: 'day', fallback: 'local' });
    // A key the store never decided starts from zero.
    expect(await limiter.consume({ keyId: 'other' }, limits)).toMatchObject({ outcome: 'allowed', fallback: 'local' });
    health.close();
  });

  it('local: a key the store had banned stays banned on the fallback', async () => {
    const ban = { threshold: 1, windowSeconds: 60, durationSeconds: 600 };
    const { limiter, store, health } = setUp('local', ban);
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push((await limiter.consume({ keyId: 'k' }, limits)).outcome);
    expect(outcomes).toEqual(['allowed', 'allowed', 'allowed', 'limited', 'limited']);
    expect((await limiter.consume({ keyId: 'k' }, limits)).outcome).toBe('banned');
    store.down = true;
    expect(await limiter.consume({ keyId: 'k' }, limits)).toMatchObject({ outcome: 'banned', fallback: 'local' });
    health.close();
  });

  it('open: admits what the fallback would refuse, bans included, and marks it', async () => {
    const ban = { threshold: 1, windowSeconds: 60, durationSeconds: 600 };
    const { limiter, store, health } = setUp('open', ban);
    for (let i = 0; i < 6; i++) await limiter.consume({ keyId: 'k' }, limits);
    expect((await limiter.consume({ keyId: 'k' }, limits)).outcome).toBe('banned');
    store.down = true;
    const served = [];
    for (let i = 0; i < 4; i++) served.push(await limiter.consume({ keyId: 'k' }, limits));
    expect(served.map((d) => [d.outcome, d.fallback])).toEqual(Array(4).fill(['allowed', 'open']));
    const last = served.at(-1)!;
    expect(last.outcome === 'allowed' && last.day.remaining).toBe(0);
    health.close();
  });
});

describe('StoreHealth', () => {
  it('probes until the store answers, then reports the recovery once', async () => {
    let answers = false;
    let probes = 0;
    const seen: string[] = [];
    const health = new StoreHealth(
      async () => {
        probes += 1;
        if (!answers) throw new Error('down');
      },
      1,
      { degraded: () => seen.push('degraded'), recovered: () => seen.push('recovered') },
    );
    health.reportFailure(new Error('x'));
    health.reportFailure(new Error('y'));
    await eventually(() => probes >= 3, { timeoutMs: 2000 });
    expect(health.degraded).toBe(true);
    answers = true;
    await eventually(() => !health.degraded, { timeoutMs: 2000 });
    expect(seen).toEqual(['degraded', 'recovered']);
    health.close();
  });

  it('stops probing once closed', async () => {
    let probes = 0;
    const health = new StoreHealth(
      async () => {
        probes += 1;
        throw new Error('down');
      },
      1,
      { degraded: () => {}, recovered: () => {} },
    );
    health.reportFailure(new Error('x'));
    await eventually(() => probes >= 1, { timeoutMs: 2000 });
    health.close();
    const after = probes;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(probes).toBeLessThanOrEqual(after + 1);
  });
});
