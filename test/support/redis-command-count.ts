import type Redis from 'ioredis';

/** Commands a Redis server has executed, all clients, except INFO (the observer's own calls). */
export async function commandsExecuted(observer: Redis): Promise<number> {
  const info = await observer.info('commandstats');
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (match[1] !== 'info') total += Number(match[2]);
  return total;
}

/**
 * The instances' own background commands per millisecond (the key-store loss check every 5 s,
 * issued-mark reads), sampled over two loss-check periods while nothing is sent: a bound on what a
 * flood costs is about the flood, and a flood that takes longer on a crowded machine also spans
 * more of these (docs/testing.md).
 */
export async function idleCommandsPerMs(observer: Redis, sampleMs = 10_000): Promise<number> {
  const before = await commandsExecuted(observer);
  const startedAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, sampleMs));
  return ((await commandsExecuted(observer)) - before) / (Date.now() - startedAt);
}
