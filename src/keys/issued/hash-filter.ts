import { randomInt } from 'node:crypto';

/** What the issued-key filter answers per key hash: false means "certainly never added". */
export interface HashMembership {
  add(hash: string): void;
  has(hash: string): boolean;
  /** Hashes added (a hash added twice counts twice). */
  readonly count: number;
  /** Bytes of filter state (the bit arrays), for the docs and the metrics. */
  readonly bytes: number;
}

/** Lowercase hex SHA-256, as `hashApiKey` writes it; anything else can never match a presented key. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

export const DEFAULT_FALSE_POSITIVE_RATE = 0.001;

/** Per-process seeds, so that a false positive found against one instance is none on another or after a restart. */
export interface FilterSeeds {
  a: number;
  b: number;
}

export function randomSeeds(): FilterSeeds {
  return { a: randomInt(0, 2 ** 32), b: randomInt(0, 2 ** 32) };
}

/**
 * A Bloom filter over SHA-256 hex hashes, sized for `capacity` hashes at `falsePositiveRate`. The
 * input is already a uniform hash, so no further hashing: two 32-bit slices of it (xored with the
 * seeds) give the k probe positions by double hashing (Kirsch and Mitzenmacher). A false positive
 * costs the caller one store lookup; a false negative cannot happen.
 */
export class BloomFilter implements HashMembership {
  private readonly words: Uint32Array;
  private readonly bitCount: number;
  private readonly probes: number;
  count = 0;

  constructor(
    readonly capacity: number,
    falsePositiveRate: number = DEFAULT_FALSE_POSITIVE_RATE,
    private readonly seeds: FilterSeeds = randomSeeds(),
  ) {
    if (!(capacity >= 1) || !(falsePositiveRate > 0 && falsePositiveRate < 1))
      throw new Error('capacity must be ≥ 1 and falsePositiveRate in (0, 1)');
    const bits = Math.ceil((-capacity * Math.log(falsePositiveRate)) / Math.LN2 ** 2);
    // Whole 32-bit words, and below 2^32 bits so that positions stay exact in doubles.
    this.bitCount = Math.min(Math.ceil(bits / 32) * 32, 2 ** 32 - 32);
    this.probes = Math.max(1, Math.round((this.bitCount / capacity) * Math.LN2));
    this.words = new Uint32Array(this.bitCount / 32);
  }

  get bytes(): number {
    return this.words.byteLength;
  }

  add(hash: string): void {
    if (!SHA256_HEX.test(hash)) return;
    const [h1, h2] = this.slices(hash);
    for (let i = 0; i < this.probes; i++) {
      const bit = (h1 + i * h2) % this.bitCount;
      const word = bit >>> 5;
      this.words[word] = this.words[word]! | (1 << (bit & 31));
    }
    this.count++;
  }

  has(hash: string): boolean {
    const [h1, h2] = this.slices(hash);
    if (Number.isNaN(h1) || Number.isNaN(h2)) return false;
    for (let i = 0; i < this.probes; i++) {
      const bit = (h1 + i * h2) % this.bitCount;
      if ((this.words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }

  private slices(hash: string): [number, number] {
    const h1 = (Number.parseInt(hash.substring(0, 8), 16) ^ this.seeds.a) >>> 0;
    // Odd, so the probes of one hash never all land on one position.
    const h2 = ((Number.parseInt(hash.substring(8, 16), 16) ^ this.seeds.b) | 1) >>> 0;
    return [h1, h2];
  }
}

/**
 * Bloom filters that grow: when the newest is full, another of twice its capacity takes the new
 * hashes, so the false-positive rate stays near its target (the sum over the filters) without
 * re-reading every hash from the store. A rebuild from the store starts again with one filter.
 */
export class GrowingBloomFilter implements HashMembership {
  private readonly filters: BloomFilter[];

  constructor(
    initialCapacity: number,
    private readonly falsePositiveRate: number = DEFAULT_FALSE_POSITIVE_RATE,
    private readonly seeds: FilterSeeds = randomSeeds(),
  ) {
    this.filters = [new BloomFilter(initialCapacity, falsePositiveRate, seeds)];
  }

  get count(): number {
    return this.filters.reduce((sum, filter) => sum + filter.count, 0);
  }

  get bytes(): number {
    return this.filters.reduce((sum, filter) => sum + filter.bytes, 0);
  }

  /** Filters in use (1 until the first one filled up). */
  get stages(): number {
    return this.filters.length;
  }

  add(hash: string): void {
    let newest = this.filters[this.filters.length - 1]!;
    if (newest.count >= newest.capacity) {
      newest = new BloomFilter(newest.capacity * 2, this.falsePositiveRate, this.seeds);
      this.filters.push(newest);
    }
    newest.add(hash);
  }

  has(hash: string): boolean {
    for (const filter of this.filters) if (filter.has(hash)) return true;
    return false;
  }
}
