import { PendingReleases } from '../../../../src/limits/in-flight/pending-releases';
import { eventually } from '../../../support/eventually';

function recorder(): {
  batches: Array<Record<string, string[]>>;
  send: (batch: Map<string, string[]>) => Promise<void>;
} {
  const batches: Array<Record<string, string[]>> = [];
  return { batches, send: async (batch) => void batches.push(Object.fromEntries(batch)) };
}

describe('PendingReleases', () => {
  it('hands a key its releases once, in order, up to the carried maximum; the rest stay for the next consume', async () => {
    const { batches, send } = recorder();
    const pending = new PendingReleases(send, 600_000, 2);
    for (const id of ['a', 'b', 'c']) pending.add('k1', id);
    pending.add('k2', 'x');
    expect(pending.take('k1')).toEqual(['a', 'b']);
    expect(pending.take('k1')).toEqual(['c']);
    expect(pending.take('k1')).toBeUndefined();
    expect(pending.size).toBe(1);
    await pending.flush();
    expect(batches).toEqual([{ k2: ['x'] }]);
  });

  it('sends only what no consume took, without being asked', async () => {
    const { batches, send } = recorder();
    const pending = new PendingReleases(send, 10, 64);
    pending.add('k1', 'taken');
    expect(pending.take('k1')).toEqual(['taken']);
    pending.add('k2', 'left');
    await eventually(() => batches.length > 0, { timeoutMs: 10_000, pollMs: 5, what: 'the timed batch' });
    expect(batches).toEqual([{ k2: ['left'] }]);
  });

  it('sends what no consume took in one batch after the flush period, without being asked', async () => {
    const { batches, send } = recorder();
    const pending = new PendingReleases(send, 10, 64);
    pending.add('k1', 'a');
    pending.add('k2', 'b');
    pending.add('k1', 'c');
    await eventually(() => batches.length > 0, { timeoutMs: 10_000, pollMs: 5, what: 'the timed batch' });
    expect(batches).toEqual([{ k1: ['a', 'c'], k2: ['b'] }]);
    expect(pending.size).toBe(0);
  });

  it('puts back the releases of a consume that failed, to go with the next batch; a failed batch is dropped (the lease ttl frees those)', async () => {
    const batches: Array<Record<string, string[]>> = [];
    let fail = true;
    const pending = new PendingReleases(
      async (batch) => {
        batches.push(Object.fromEntries(batch));
        if (fail) throw new Error('Redis is down');
      },
      600_000,
      64,
    );
    pending.add('k1', 'a');
    const carried = pending.take('k1')!;
    pending.putBack('k1', carried);
    await pending.flush();
    fail = false;
    pending.add('k1', 'b');
    await pending.flush();
    expect(batches).toEqual([{ k1: ['a'] }, { k1: ['b'] }]);
    // Nothing pending: a flush sends nothing.
    await pending.flush();
    expect(batches).toHaveLength(2);
  });
});
