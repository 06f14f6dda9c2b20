/** A seeded order for the harness's faults: the same seed, the same order (printed, so a failure can be replayed). */

/** mulberry32: a small, well-spread 32-bit generator; numbers in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A shuffled copy (Fisher-Yates) of `items`. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

/** The seed: LEASES_HARNESS_SEED when set (to replay a failure), else one drawn now. */
export function harnessSeed(): number {
  const given = Number(process.env.LEASES_HARNESS_SEED);
  return Number.isInteger(given) && given > 0 ? given : 1 + Math.floor(Math.random() * 2 ** 31);
}
