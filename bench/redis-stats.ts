import Redis from 'ioredis';

/** Calls per command, from `INFO commandstats` (commands run inside Lua scripts included). */
export type CommandCounts = Record<string, number>;

/** Reads the bench's private Redis; its own INFO calls are left out of the counts. */
export class RedisCommandStats {
  private readonly client: Redis;

  constructor(url: string) {
    this.client = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 });
  }

  async snapshot(): Promise<CommandCounts> {
    const text = await this.client.info('commandstats');
    const counts: CommandCounts = {};
    for (const line of text.split('\n')) {
      const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
      if (match && match[1] !== 'info') counts[match[1]!] = Number(match[2]);
    }
    return counts;
  }

  close(): void {
    this.client.disconnect();
  }
}

export function difference(after: CommandCounts, before: CommandCounts): CommandCounts {
  const delta: CommandCounts = {};
  for (const [name, calls] of Object.entries(after)) {
    const n = calls - (before[name] ?? 0);
    if (n > 0) delta[name] = n;
  }
  return delta;
}
