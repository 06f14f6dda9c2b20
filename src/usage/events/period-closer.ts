import { randomUUID } from 'node:crypto';
import type { Clock } from '../../shared/clock';
import type { Logger } from '../../shared/logger';
import { USAGE_METERS, usagePeriodMs, type UsageEventsConfig, type UsageMeter } from '../../shared/config';
import type { Outbox, OutboxEvent } from '../../notifications/outbox';
import { afterSending, duePeriods, type DuePeriod } from './period-closing';
import { touchedMember, type TouchedKeyDay, type UsagePeriodLedger } from './period-ledger';
import type { SentStateStore } from './sent-state';
import { meterValue, usageCloudEvent, USAGE_EVENT_TYPES } from './usage-event';

/**
 * Key-days listed per tick at most (oldest mark first). Each is read again only when a write marked
 * it since or another period closed (LookedAt), so a tick between period boundaries costs the listing.
 */
const KEY_DAYS_PER_TICK = 100_000;

interface LookedAt {
  mark: number;
  closedEnd: number;
}
/** The closer's lease outlives a tick by far; a closer that dies leaves it to another within this. */
const LEASE_MS = 30_000;
/** How long the outbox recognises an event handed to it again (a closer that died between its two writes). */
const SEEN_FOR_MS = 86_400_000;

export interface PeriodCloserOptions {
  ledger: UsagePeriodLedger;
  state: SentStateStore;
  outbox: Outbox;
  /** Whose key: its consumer and plan at closing time (null: deleted). */
  keys: { get(id: string): Promise<{ plan: string; consumerId?: string | null } | null> };
  config(): UsageEventsConfig;
  clock: Clock;
  logger: Logger;
  /** Events handed to the outbox: the sender may look at once. */
  onWritten(): void;
  /** Events the outbox dropped past its bound. */
  onDropped(count: number): void;
}

/**
 * Closes periods: every tick, for each key-day the ledger marked as written, sends what its closed
 * periods owe (period-closing.ts) as events through the outbox. One closer at a time across
 * instances holds a lease; each key-day's state is compared-and-set besides, so a closer that lost
 * its lease while paused cannot send a revision twice under two contents.
 */
export class PeriodCloser {
  private readonly owner = randomUUID();
  private running: Promise<void> | null = null;
  /** Each touched key-day as this closer last closed it: looked at again only when its data or the closed periods moved. */
  private lookedAt = new Map<string, LookedAt>();

  constructor(private readonly options: PeriodCloserOptions) {}

  /** One pass; a pass still running makes this one a no-op. */
  tick(): Promise<void> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async pass(): Promise<void> {
    const config = this.options.config();
    if (!config.enabled || config.url === null) return;
    const now = this.options.clock.now();
    if (!(await this.options.state.lease(this.owner, now, LEASE_MS))) return;
    const graceMs = config.graceSeconds * 1000;
    const looked = new Map<string, LookedAt>();
    for (const entry of await this.options.ledger.touched(KEY_DAYS_PER_TICK)) {
      const member = touchedMember(entry.periodMs, entry.day, entry.keyId);
      // The end of the latest period closed by now: nothing new is due while neither it nor the data moved.
      const closedEnd = Math.floor((now - graceMs) / entry.periodMs) * entry.periodMs;
      const before = this.lookedAt.get(member);
      if (before === undefined || before.mark !== entry.mark || before.closedEnd !== closedEnd)
        await this.closeKeyDay(entry, config, now, graceMs);
      looked.set(member, { mark: entry.mark, closedEnd });
      // Every period a write up to `mark` touched has closed (with its grace) and was looked at.
      if (now >= entry.mark + entry.periodMs + graceMs) {
        await this.options.ledger.untouch(entry);
        looked.delete(member);
      }
    }
    this.lookedAt = looked;
  }

  private async closeKeyDay(
    entry: TouchedKeyDay,
    config: UsageEventsConfig,
    now: number,
    graceMs: number,
  ): Promise<void> {
    const { ledger, state } = this.options;
    const { keyId, periodMs, day } = entry;
    let held = await state.read(keyId, periodMs, day);
    if (held.pending.length > 0) {
      // A closer died between the state and the outbox: hand its events over again (same ids).
      await this.handOver(held.pending, now, config);
      if (!(await state.write(keyId, periodMs, day, held.version, { periods: held.periods, pending: [] }))) return;
      held = await state.read(keyId, periodMs, day);
    }
    const due = duePeriods(await ledger.periodsOf(keyId, periodMs, day), held.periods, periodMs, now - graceMs);
    if (due.length === 0) return;
    const record = await this.options.keys.get(keyId);
    const events = due.flatMap((d) =>
      this.eventsOf(
        d,
        { keyId, periodMs, consumerId: record?.consumerId ?? null, plan: record?.plan ?? null },
        config,
        now,
      ),
    );
    const periods = afterSending(held.periods, due);
    if (!(await state.write(keyId, periodMs, day, held.version, { periods, pending: events }))) return;
    await this.handOver(events, now, config);
    await state.write(keyId, periodMs, day, held.version + 1, { periods, pending: [] });
  }

  private eventsOf(
    d: DuePeriod,
    who: { keyId: string; periodMs: number; consumerId: string | null; plan: string | null },
    config: UsageEventsConfig,
    now: number,
  ): OutboxEvent[] {
    const meters = USAGE_METERS.filter((m) => config.meters.includes(m));
    // A correction carries only the meters it changes; a period's first event carries every meter.
    const sent = d.revision === 0 ? meters : meters.filter((m: UsageMeter) => meterValue(m, d) !== 0);
    return sent.map((meter) => {
      const event = usageCloudEvent({ ...who, ...d, source: config.source, meter, periodStart: d.start });
      // The outbox's type is only a metrics label for webhooks; usage events keep theirs in the body.
      return {
        id: event.id,
        type: USAGE_EVENT_TYPES[meter] as OutboxEvent['type'],
        body: JSON.stringify(event),
        createdAt: now,
        seenUntil: now + SEEN_FOR_MS,
        endpoints: [USAGE_SINK_ENDPOINT],
      };
    });
  }

  private async handOver(events: OutboxEvent[], now: number, config: UsageEventsConfig): Promise<void> {
    if (events.length === 0) return;
    const dropped = await this.options.outbox.add(events, now, config.outboxMaxEvents);
    if (dropped.length > 0) this.options.onDropped(dropped.length);
    this.options.onWritten();
  }

  /** The period length of the config in force (for the ledger's recorder). */
  static periodMsOf(config: UsageEventsConfig): number {
    return config.enabled && config.url !== null ? usagePeriodMs(config) : 0;
  }

  async close(): Promise<void> {
    await this.running;
  }
}

/** The outbox's one receiver for usage events: the sink in force, whatever its URL (a reload may change it). */
export const USAGE_SINK_ENDPOINT = 'sink';
