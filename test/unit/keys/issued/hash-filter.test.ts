import { createHash, randomBytes } from 'node:crypto';
import { BloomFilter, GrowingBloomFilter } from '../../../../src/keys/issued/hash-filter';

const randomHash = () => createHash('sha256').update(randomBytes(16)).digest('hex');
const hashes = (n: number) => Array.from({ length: n }, randomHash);

describe('BloomFilter over key hashes', () => {
  it('never answers "not added" for a hash that was added', () => {
    const filter = new BloomFilter(20_000, 0.001);
    const added = hashes(20_000);
    for (const hash of added) filter.add(hash);
    expect(added.filter((hash) => !filter.has(hash))).toEqual([]);
    expect(filter.count).toBe(20_000);
  });

  it('keeps false positives near the target rate when full', () => {
    const filter = new BloomFilter(20_000, 0.001);
    for (const hash of hashes(20_000)) filter.add(hash);
    const probes = hashes(100_000);
    const falsePositives = probes.filter((hash) => filter.has(hash)).length;
    // 0.1 % of 100,000 is 100; twice that is far outside chance.
    expect(falsePositives).toBeLessThan(200);
  });

  it('needs about 1.8 MB per million hashes at 0.1 %', () => {
    const filter = new BloomFilter(1_000_000, 0.001);
    expect(filter.bytes).toBeGreaterThan(1.7e6);
    expect(filter.bytes).toBeLessThan(1.9e6);
  });

  it('answers false for what is not a hex SHA-256, and ignores adding it', () => {
    const filter = new BloomFilter(10, 0.001);
    filter.add('not-a-hash');
    expect(filter.count).toBe(0);
    expect(filter.has('zz'.repeat(32))).toBe(false);
  });

  it('puts the hashes of one key set on other bits with other seeds', () => {
    const added = hashes(1000);
    const one = new BloomFilter(1000, 0.01, { a: 1, b: 2 });
    const other = new BloomFilter(1000, 0.01, { a: 3, b: 4 });
    for (const hash of added) {
      one.add(hash);
      other.add(hash);
    }
    const probes = hashes(50_000);
    const positivesOfOne = probes.filter((hash) => one.has(hash));
    expect(positivesOfOne.length).toBeGreaterThan(0);
    // A false positive of one filter is, almost always, none of the other.
    expect(positivesOfOne.filter((hash) => other.has(hash)).length).toBeLessThan(positivesOfOne.length / 5);
  });
});

describe('GrowingBloomFilter', () => {
  it('adds a filter of twice the capacity when full and still finds every hash', () => {
    const filter = new GrowingBloomFilter(1000, 0.001);
    const added = hashes(7000);
    for (const hash of added) filter.add(hash);
    expect(filter.stages).toBe(3); // 1000 + 2000 + 4000
    expect(filter.count).toBe(7000);
    expect(added.every((hash) => filter.has(hash))).toBe(true);
    const falsePositives = hashes(50_000).filter((hash) => filter.has(hash)).length;
    expect(falsePositives).toBeLessThan(50_000 * 0.001 * 3 * 2);
  });
});
