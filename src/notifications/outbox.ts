import type { WebhookEventType } from '../shared/config';
import type { WebhookEvent } from './events';

/**
 * Where events wait until each receiver has them (CONTRACT §5: at least once, across restarts):
 * Redis when the gateway has one, so that any instance delivers what another saw or left half
 * done; SQLite under DATA_DIR in process. Both behave alike (test/integration/notifications/
 * outbox-contract.ts runs one suite against both).
 *
 * An event becomes one delivery per receiver subscribed to its type. A delivery is claimed under a
 * lease before it is tried, so two instances (or workers) never try the same one at once; one that
 * dies mid-attempt leaves it to be claimed again when its lease ends.
 *
 * Each instance also says, every few seconds and after a reload, which receivers its config
 * names (receiver-roster.ts): deliveries to a receiver that no running instance names any more are
 * dropped, so a receiver removed from the config leaves nothing waiting for ever (issue 48). An
 * instance that still names it (one not reloaded yet, mid rolling deploy) keeps it.
 */

/** An event with the receivers (endpoint keys, see endpoints.ts) it goes to. */
export interface OutboxEvent extends WebhookEvent {
  endpoints: readonly string[];
}

/** A delivery taken for one attempt: this instance owns it until `leaseUntil`. */
export interface ClaimedDelivery {
  endpoint: string;
  eventId: string;
  type: WebhookEventType;
  body: string;
  createdAt: number;
  /** Attempts already made (0 for the first). */
  attempts: number;
  /** Epoch ms the claim lapses; it also names the claim, so a late answer cannot touch a newer one. */
  leaseUntil: number;
}

export interface Outbox {
  /**
   * Adds the events not seen before (by id, until their seenUntil), each due at once for each of its
   * endpoints. Past `maxEvents` the oldest events are dropped; their types are returned (for the
   * count). Safe to repeat: an event already added is not added again.
   */
  add(events: readonly OutboxEvent[], now: number, maxEvents: number): Promise<WebhookEventType[]>;
  /** Up to `max` deliveries to `endpoint` due by `now`, each leased until `leaseUntil`. */
  claim(endpoint: string, max: number, now: number, leaseUntil: number): Promise<ClaimedDelivery[]>;
  /** Delivered, or given up: the delivery leaves; the event too once none of its deliveries is left. */
  finish(delivery: ClaimedDelivery): Promise<void>;
  /** The attempt failed: one more counted, tried again at `nextAt`. */
  retry(delivery: ClaimedDelivery, nextAt: number): Promise<void>;
  /** Not attempted after all (shutting down): due again at `now`, no attempt counted. */
  release(delivery: ClaimedDelivery, now: number): Promise<void>;
  /**
   * Says which receivers `instance` delivers to (the config in force there), believed until
   * `liveUntil` unless said again; then drops every delivery to a receiver that no instance still
   * believed names (its event too once none of its deliveries is left): a receiver removed from
   * the config everywhere. An instance naming none is not kept at all (a gateway without webhooks
   * writes nothing). At most `maxDrops` deliveries per call, so that one call never holds the store
   * for long (call again while it returns that many). The types of the deliveries dropped, one per
   * delivery.
   */
  keepReceivers(
    instance: string,
    endpoints: readonly string[],
    now: number,
    liveUntil: number,
    maxDrops: number,
  ): Promise<WebhookEventType[]>;
  /** `instance` stops (its receivers are no longer named by it); nothing is dropped here. */
  forgetInstance(instance: string): Promise<void>;
  /** Events waiting for at least one receiver. */
  size(): Promise<number>;
  close(): void;
}
