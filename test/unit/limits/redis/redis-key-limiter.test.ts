import { keyLimiterRedisKey } from '../../../../src/limits/redis/redis-key-limiter';

// The slot function ioredis itself routes Cluster commands with.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- cluster-key-slot ships no types
const calculateSlot: (key: string) => number = require('cluster-key-slot');

/** The part of a key Redis Cluster hashes: the first non-empty {…} section, else the whole key. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

describe('Redis key layout of the key limiter', () => {
  it('tags each API key’s state with the key id, so a Cluster keeps it in the key id’s slot', () => {
    const key = keyLimiterRedisKey('asg:prod', 'k_01HZX3');
    expect(key).toBe('asg:prod:rl:{k_01HZX3}');
    expect(hashTag(key)).toBe('k_01HZX3');
    expect(calculateSlot(key)).toBe(calculateSlot('k_01HZX3'));
  });

  it('puts one key id in the same slot under every namespace, and different ids apart', () => {
    const ids = ['a', 'key-1', 'key-2', '0b8e5c1e-33f2-4c7a-9a51-5a0e0f7d9d11'];
    for (const id of ids) {
      expect(calculateSlot(keyLimiterRedisKey('asg:prod', id))).toBe(
        calculateSlot(keyLimiterRedisKey('asg:staging', id)),
      );
    }
    const slots = new Set(ids.map((id) => calculateSlot(keyLimiterRedisKey('asg:prod', id))));
    expect(slots.size).toBe(ids.length);
  });
});
