import { FairShareQueue } from '../../../../src/gateway/upstream/fair-share-queue';

/** A queue of labelled requests: `${key}${n}`. */
function queue(activeLimit: number, bound: number, newcomerReserve = 0) {
  const q = new FairShareQueue<string>(activeLimit, bound, newcomerReserve);
  let n = 0;
  const offer = (key: string) => {
    const item = `${key}${++n}`;
    return { item, offer: q.offer(key, item) };
  };
  return { q, offer };
}

describe('FairShareQueue', () => {
  it('starts up to the active limit, queues up to the bound, then refuses the key holding the most', () => {
    const { q, offer } = queue(2, 4);
    expect(offer('a').offer).toEqual({ outcome: 'start', evicted: null });
    expect(offer('a').offer.outcome).toBe('start');
    expect(offer('a').offer).toEqual({ outcome: 'wait', evicted: null });
    expect(offer('a').offer).toEqual({ outcome: 'wait', evicted: null });
    expect(offer('a').offer).toEqual({ outcome: 'refused' });
    expect(q.size()).toBe(4);
    expect(q.active()).toBe(2);
  });

  it('a key holding fewer takes the place of the oldest waiting request of the key holding the most', () => {
    const { q, offer } = queue(2, 4);
    for (let i = 0; i < 4; i++) offer('a');
    expect(offer('b').offer).toEqual({ outcome: 'wait', evicted: 'a3' });
    expect(q.heldBy('a')).toBe(3);
    expect(q.heldBy('b')).toBe(1);
    // b now holds 1 of a's 3: a's newcomer is still the one refused, and so is b's once b would not hold fewer than a.
    expect(offer('a').offer).toEqual({ outcome: 'refused' });
    expect(offer('b').offer).toEqual({ outcome: 'wait', evicted: 'a4' });
    expect(offer('b').offer).toEqual({ outcome: 'refused' });
  });

  it('refuses the newcomer when no key over its fair share has a request waiting (only waiting requests give up their place)', () => {
    const { offer } = queue(3, 4);
    offer('a');
    offer('a');
    offer('a');
    offer('b');
    // b (waiting) holds 1 of 4 among three keys: under its share, it keeps its place.
    expect(offer('c').offer).toEqual({ outcome: 'refused' });
  });

  it('a freed place goes to the waiting key with the fewest at the inventory, then in turn', () => {
    const { q, offer } = queue(2, 10);
    offer('a');
    offer('a');
    offer('a'); // a3 waits
    offer('a'); // a4
    offer('b'); // b5
    offer('c'); // c6
    offer('b'); // b7
    const served: string[] = [];
    // Each served request ends at once: the order is the queue's alone.
    let next = q.finish('a');
    while (next) {
      served.push(next);
      next = q.finish(next[0]!);
    }
    expect(served).toEqual(['b5', 'c6', 'b7', 'a3', 'a4']);
    expect(q.active()).toBe(1);
  });

  it('withdraw and drain give back the places of waiting requests only', () => {
    const { q, offer } = queue(1, 5);
    offer('a');
    const waiting = [offer('b').item, offer('b').item, offer('c').item];
    expect(q.withdraw('b', waiting[0]!)).toBe(true);
    expect(q.withdraw('b', waiting[0]!)).toBe(false);
    expect(q.drain()).toEqual([
      { key: 'b', item: waiting[1] },
      { key: 'c', item: waiting[2] },
    ]);
    expect(q.size()).toBe(1);
    expect(q.finish('a')).toBeNull();
    expect(q.size()).toBe(0);
  });

  it('never refuses a key holding fewer than its fair share while another has requests waiting (random traffic)', () => {
    // A seeded generator: the same sequence on every run.
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const { q, offer } = queue(4, 12);
    const active: string[] = [];
    for (let step = 0; step < 20_000; step++) {
      if (active.length > 0 && random() < 0.3) {
        const [done] = active.splice(Math.floor(random() * active.length), 1);
        const next = q.finish(done![0]!);
        if (next) active.push(next);
        continue;
      }
      // Key a is loud: most arrivals are its.
      const key = random() < 0.7 ? 'a' : ['b', 'c', 'd'][Math.floor(random() * 3)]!;
      const keysHolding = new Set(['a', 'b', 'c', 'd'].filter((k) => q.heldBy(k) > 0 || k === key)).size;
      const fairShare = 12 / keysHolding;
      const heldBefore = q.heldBy(key);
      const waitingElsewhere = q.size() - q.active() > 0;
      const { item, offer: result } = offer(key);
      if (result.outcome === 'start') active.push(item);
      if (result.outcome === 'refused' && waitingElsewhere)
        expect(heldBefore).toBeGreaterThanOrEqual(Math.floor(fairShare));
      expect(q.size()).toBeLessThanOrEqual(12);
      expect(q.active()).toBeLessThanOrEqual(4);
    }
  });

  it('keeps the reserve from any one key: a key with nothing at the inventory starts at once', () => {
    const { q, offer } = queue(4, 8, 1);
    for (let i = 0; i < 3; i++) expect(offer('a').offer.outcome).toBe('start');
    // The fourth connection is free, but not for a.
    expect(offer('a').offer.outcome).toBe('wait');
    expect(offer('b').offer.outcome).toBe('start');
    expect(q.active()).toBe(4);
    // b's end frees the reserve again; a, at its most, is not given it.
    expect(q.finish('b')).toBeNull();
    expect(offer('c').offer.outcome).toBe('start');
    // a's own end lets its waiting request through.
    expect(q.finish('a')).toBe('a4');
    // At the bound, the reserve free: a newcomer takes a's oldest waiting place and starts at once.
    expect(q.finish('c')).toBeNull();
    for (let i = 0; i < 5; i++) offer('a');
    expect(q.size()).toBe(8);
    expect(offer('d').offer).toEqual({ outcome: 'start', evicted: 'a7' });
  });
});
