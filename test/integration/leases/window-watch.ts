import Redis from 'ioredis';

/**
 * The store's own count of the filled windows, for the harness's evidence: every 100 ms each
 * node's windows hashes are read (a minute's count is gone once the minute turns; a node paused
 * or restarted is read again when it answers), the last count of each minute kept. Against the
 * clients' tally it says how many units the store counted that no client saw admitted: requests
 * answered 5xx or not at all that the store ran anyway, and lease units no request used.
 */
export class WindowWatch {
  private readonly nodes: Redis[];
  private readonly timer: NodeJS.Timeout;
  /** Tally limit name -> minute's X-RateLimit-Reset (epoch s) -> the store's last count (mc) in it. */
  private readonly counts = new Map<string, Map<number, number>>();

  /** `env`: the store's (REDIS_URL or REDIS_CLUSTER_NODES); `limitOf` names a windows hash's limit (null: not watched). */
  constructor(
    env: Record<string, string>,
    private readonly limitOf: (hash: string) => string | null,
  ) {
    const urls = env.REDIS_URL
      ? [env.REDIS_URL]
      : (env.REDIS_CLUSTER_NODES ?? '').split(',').map((n) => `redis://${n}`);
    this.nodes = urls.map((url) => {
      const node = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 500 });
      node.on('error', () => {});
      return node;
    });
    this.timer = setInterval(() => void this.read(), 100);
    this.timer.unref();
  }

  private async read(): Promise<void> {
    await Promise.all(this.nodes.map((node) => this.readNode(node).catch(() => {})));
  }

  private async readNode(node: Redis): Promise<void> {
    for (const hash of await node.keys('*:rl:*')) {
      const limit = this.limitOf(hash);
      if (limit === null) continue;
      const [mw, mc] = await node.hmget(hash, 'mw', 'mc');
      if (mw === null || mc === null) continue;
      let byMinute = this.counts.get(limit);
      if (!byMinute) this.counts.set(limit, (byMinute = new Map()));
      byMinute.set((Number(mw) + 1) * 60, Number(mc));
    }
  }

  /** The store's count of `limit` in the minute ending at `resetAt` (epoch s), as last read; null when never read. */
  counted(limit: string, resetAt: number): number | null {
    return this.counts.get(limit)?.get(resetAt) ?? null;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.read();
    for (const node of this.nodes) node.disconnect();
  }
}
