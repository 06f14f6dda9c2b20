/** One key's billing month as the in-process store keeps it on disk. */
export interface MonthEntry {
  keyId: string;
  /** Epoch ms: the month's start and end (the key's billing day, 00:00 UTC). */
  monthStart: number;
  monthEnd: number;
  /** Units taken this month, and units credited by the admin API. */
  count: number;
  credits: number;
}

/**
 * Where the in-process store keeps month windows and credits, so that a restart keeps them
 * (CONTRACT §4: month windows and credits survive a restart of the gateway, in process too).
 * Minute and day windows and bans stay in memory: losing them on a restart is allowed, and a
 * month of counting is not. With Redis the windows live in Redis and need none of this.
 */
export interface MonthLedger {
  /** The months that have not ended at `now`; ended ones are dropped. Read once, at start. */
  load(now: number): MonthEntry[];
  /** Writes these entries (one transaction); throws StorageUnavailableError when the disk refuses. */
  save(entries: readonly MonthEntry[]): void;
}

/**
 * The in-process limiter's writer to its ledger: a request only marks its key's month as changed
 * (no I/O on the request path); the changed months are written together every `intervalMs` and on
 * close. A crash loses at most the last interval's units, never a credit: grants are written
 * before they are applied (`saveNow`), so before the admin API answers.
 */
export class MonthLedgerWriter {
  /** Key id → the end of the month whose count changed since the last write. */
  private readonly changed = new Map<string, number>();
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ledger: MonthLedger,
    /** The current count and credits of a key's month, read when it is written. */
    private readonly current: (keyId: string) => { monthStart: number; count: number; credits: number } | null,
    intervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => this.flush(), intervalMs);
      this.timer.unref();
    }
  }

  markChanged(keyId: string, monthEnd: number): void {
    this.changed.set(keyId, monthEnd);
  }

  /** Writes one entry now (a credit grant): throws when the disk refuses, and then nothing is applied. */
  saveNow(entry: MonthEntry): void {
    this.ledger.save([entry]);
    this.changed.delete(entry.keyId);
  }

  /** Writes every changed month; on failure they stay marked and go with the next write. */
  flush(): void {
    if (this.changed.size === 0) return;
    const batch = [...this.changed];
    this.changed.clear();
    const entries: MonthEntry[] = [];
    for (const [keyId, monthEnd] of batch) {
      const month = this.current(keyId);
      if (month) entries.push({ keyId, monthEnd, ...month });
    }
    try {
      this.ledger.save(entries);
    } catch (err) {
      for (const [keyId, monthEnd] of batch) if (!this.changed.has(keyId)) this.changed.set(keyId, monthEnd);
      this.onError(err);
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}
