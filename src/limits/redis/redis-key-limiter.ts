import type { Clock } from '../../shared/clock';
import type { RedisClient } from '../../shared/redis/redis';
import type { LuaCaller } from '../../shared/redis/lua-script';
import type {
  BanSettings,
  ConsumeOptions,
  ConsumerShare,
  ConsumerWindows,
  InFlightLease,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  KeyUsage,
  MinuteWindowShape,
  WindowLimits,
  WindowName,
  WindowsHeld,
} from '../types';
import { CommandDeadline } from './command-deadline';
import { consumerWindows, withConsumer } from '../consumers/consumer-decision';
import { RedisNames, type ConsumerRedisNames, type KeyRedisNames } from './redis-names';
import { scriptKeys, type KeySlot } from './lua-model';
import { decodeDecisionReply, type DecisionReply, type WindowCounts } from './decision-reply';
import type { LeaseReturn } from '../leases/lease';
import type { LeasedDecision, LeaseStore } from '../leases/lease-store';
import { leaseArgv, leaseGrantOf, leaseTail, returnArgv, RETURN_SCRIPTS } from './lease-scripts';
import {
  LEASE_CONSUME_SCRIPTS,
  CONSUME_SCRIPTS,
  CONSUMER_USAGE_SCRIPT,
  CREDITS_SCRIPT,
  RESET_WINDOWS_SCRIPT,
  USAGE_SCRIPTS,
  type ModelScript,
} from './decision-scripts';
import { RedisWindowsMove } from './move-windows';
import {
  MAX_CARRIED_RELEASES,
  OUTCOME_CONCURRENCY_LIMITED,
  RELEASE_FLUSH_MS,
  inFlightArgv,
  isNearLimit,
  sendReleases,
} from '../in-flight/redis-in-flight';
import { LeasesNearLimit } from '../in-flight/leases-near-limit';
import { PendingReleases } from '../in-flight/pending-releases';
import { DEFAULT_BILLING_DAY } from '../../shared/constants';
import { MonthBoundaries, type MonthCount } from '../windows/month-window';
import { OUTCOME_ALLOWED, banPolicy, keyDecision, keyUsage, type OutcomeCode } from '../windows/windows';
export {
  activeBansRedisKey,
  keyLimiterRedisKey,
  leasesRedisKey,
  monthRedisKey,
  slidingLogRedisKey,
} from './redis-names';

/**
 * A key's windows and ban live in Redis under the names redis-names.ts gives them (one hash tag, so
 * one Cluster slot, for everything one consume touches: a consumer's key shares its consumer's), and
 * every decision is one script of the Lua model (lua-model.ts, decision-scripts.ts). The hash expires
 * (PEXPIRE, relative to `now`) at the end of its day plus `retainMs`, which covers any refusal window
 * or ban started that day: memory holds one small hash per key used today; a month hash expires at its
 * month's end, so credits end with their month.
 */

/** ARGV padding: a key's month when releases follow and it has none, or a consumer's window it has no limit for. */
const NO_MONTH_ARGV = ['', '', '', '', ''];

/** A script bound to a client, with the KEYS slots its calls fill. */
interface BoundScript<Reply> {
  call: LuaCaller<Reply>;
  keys: readonly KeySlot[];
}

function bind<Reply>(model: ModelScript<Reply>, redis: RedisClient): BoundScript<Reply> {
  return { call: model.script.on(redis), keys: model.keys };
}

/** Runs a bound script on a key's (and a consumer's) names. */
function run<Reply>(
  script: BoundScript<Reply>,
  names: KeyRedisNames | ConsumerRedisNames | null,
  argv: readonly string[],
  consumer?: ConsumerRedisNames,
): Promise<Reply> {
  return script.call(scriptKeys(script.keys, names, consumer), argv);
}

function monthOf(counts: WindowCounts, perMonth: number | undefined): MonthCount | null {
  return perMonth === undefined ? null : counts.month;
}

/** A reply's key windows as windows.ts reads them (a decision adds its outcome and cost). */
function keyCountsOf(reply: DecisionReply, limits: WindowLimits) {
  return {
    now: reply.now,
    minuteCount: reply.key.minuteCount,
    dayCount: reply.key.dayCount,
    bannedUntil: reply.bannedUntil,
    limits,
    minuteResetAt: reply.key.minuteResetAt || undefined,
    month: monthOf(reply.key, limits.perMonth),
  };
}

/** A lease consume's ARGV tail (leaseArgv), and what its reply ends with. */
interface LeaseCall {
  argv: string[];
  tail?: { granted: number; missed: number };
}

export interface RedisKeyLimiterOptions {
  /** Prefix of every key, e.g. `asg:prod`; staging and production can share one Redis. */
  namespace: string;
  ban: BanSettings;
  /** Config `rateLimit.minuteWindow`; default `fixed`. */
  minuteWindow?: MinuteWindowShape;
  /**
   * Takes `now` from this clock instead of Redis TIME. For tests: in production every instance
   * must decide on Redis's clock, so leave it unset.
   */
  clock?: Clock;
  /** The batch period of lease releases no consume carried (each sent within two); default RELEASE_FLUSH_MS. */
  releaseFlushMs?: number;
  /**
   * Config `redis.commandTimeoutMs`: a consume Redis runs later than this after it was sent counts
   * nothing (command-deadline.ts). Absent: no deadline. Ignored with a test clock.
   */
  commandTimeoutMs?: number;
}

/**
 * Per-key windows and bans in Redis, shared by every gateway instance. Each consume is one script
 * call (EVALSHA, EVAL the first time on a connection): ban check, both windows, refusal counting
 * and the ban, atomically, so N instances never admit more than the limit. The client is the
 * caller's: close() leaves it open.
 */
export class RedisKeyLimiter implements KeyLimiter, LeaseStore {
  private readonly scripts: {
    consume: readonly [BoundScript<number[]>, BoundScript<number[]>];
    /** Leases of units (lease-scripts.ts): the consume that also takes a lease, and the return alone. */
    leaseConsume: readonly [BoundScript<number[]>, BoundScript<number[]>];
    leaseReturn: readonly BoundScript<number>[];
    usage: BoundScript<number[]>;
    consumerUsage: BoundScript<number[]>;
    credits: BoundScript<number>;
    resetWindows: BoundScript<[number, number, number]>;
  };
  private readonly names: RedisNames;
  private readonly clock: Clock | undefined;
  /** Null with a test clock or no command timeout. */
  private readonly deadline: CommandDeadline | null;
  private readonly sliding: boolean;
  // The ban part of ARGV never changes; converted to strings once.
  private readonly threshold: string;
  private readonly banWindowMs: string;
  private readonly banDurationMs: string;
  private readonly retainMs: string;
  private readonly months = new MonthBoundaries();
  /** Moves of a key's windows between consumers. */
  private readonly moves: RedisWindowsMove;
  /** Lease releases on their way to Redis, carried by the key's next consume or sent in a batch. */
  private readonly releases: PendingReleases;
  /** Leases taken near their key's maxInFlight: released at once, not carried or batched. */
  private readonly nearLimit = new LeasesNearLimit();

  constructor(
    private readonly redis: RedisClient,
    options: RedisKeyLimiterOptions,
  ) {
    const ban = banPolicy(options.ban);
    this.threshold = String(ban.threshold);
    this.banWindowMs = String(ban.windowMs);
    this.banDurationMs = String(ban.durationMs);
    this.retainMs = String(ban.retainMs);
    this.names = new RedisNames(options.namespace);
    this.clock = options.clock;
    this.deadline =
      options.clock === undefined && options.commandTimeoutMs !== undefined
        ? new CommandDeadline(options.commandTimeoutMs)
        : null;
    this.sliding = options.minuteWindow === 'sliding';
    const [alone, withItsConsumer] = CONSUME_SCRIPTS[this.sliding ? 'sliding' : 'fixed'];
    this.scripts = {
      consume: [bind(alone, redis), bind(withItsConsumer, redis)],
      leaseConsume: [bind(LEASE_CONSUME_SCRIPTS[0], redis), bind(LEASE_CONSUME_SCRIPTS[1], redis)],
      leaseReturn: RETURN_SCRIPTS.map((model) => bind(model, redis)),
      usage: bind(USAGE_SCRIPTS[this.sliding ? 'sliding' : 'fixed'], redis),
      consumerUsage: bind(CONSUMER_USAGE_SCRIPT, redis),
      credits: bind(CREDITS_SCRIPT, redis),
      resetWindows: bind(RESET_WINDOWS_SCRIPT, redis),
    };
    this.moves = new RedisWindowsMove(redis);
    this.releases = new PendingReleases(
      (batch) => sendReleases(redis, batch),
      options.releaseFlushMs ?? RELEASE_FLUSH_MS,
      MAX_CARRIED_RELEASES,
    );
  }

  async consume(ref: KeyRef, limits: WindowLimits, options?: ConsumeOptions): Promise<KeyDecision> {
    const key = this.names.key(ref);
    const releases = this.releases.take(key.leases);
    if (releases === undefined) return this.decide(key, limits, options, undefined);
    try {
      return await this.decide(key, limits, options, releases);
    } catch (err) {
      this.releases.putBack(key.leases, releases);
      throw err;
    }
  }

  /**
   * A consume that gives back `ended` first and takes a lease of up to `wanted` units with the
   * request (leases/lease-store.ts; the lease consume of decision-scripts.ts, fixed minute only).
   */
  async consumeWithLease(
    ref: KeyRef,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    wanted: number,
    ended: LeaseReturn | null,
  ): Promise<LeasedDecision> {
    const key = this.names.key(ref);
    const lease: LeaseCall = { argv: leaseArgv(wanted, ended) };
    const releases = this.releases.take(key.leases);
    try {
      const decision = await this.decide(key, limits, options, releases, lease);
      const { granted, missed } = lease.tail!;
      return { decision, grant: leaseGrantOf(decision, granted), returned: ended === null ? undefined : missed === 0 };
    } catch (err) {
      if (releases !== undefined) this.releases.putBack(key.leases, releases);
      throw err;
    }
  }

  /** Returns no request carried, one script each (in parallel: each key is a slot of its own on a Cluster). */
  returnUnits(returns: readonly LeaseReturn[]): Promise<boolean[]> {
    return Promise.all(
      returns.map(async (plan) => {
        const shared = plan.inConsumerWindows ? plan.holder.consumerId : undefined;
        const consumer = shared === undefined ? undefined : this.names.consumer(shared);
        const script = this.scripts.leaseReturn[consumer === undefined ? 0 : 1]!;
        return (await run(script, this.names.key(plan.holder), returnArgv(plan), consumer)) === 0;
      }),
    );
  }

  /** One consume script: the key's windows, ban and lease (with its consumer's windows when it has one), the carried releases first. */
  private async decide(
    key: KeyRedisNames,
    limits: WindowLimits,
    options: ConsumeOptions | undefined,
    releases: string[] | undefined,
    lease?: LeaseCall,
  ): Promise<KeyDecision> {
    const cost = options?.cost ?? 1;
    const share = options?.consumer;
    const sentAt = Date.now();
    const argv = [
      String(limits.perMinute),
      String(limits.perDay),
      this.threshold,
      this.banWindowMs,
      this.banDurationMs,
      this.retainMs,
      options?.shadow === true ? '1' : '0',
      this.deadline === null ? this.now() : this.deadline.argument(sentAt),
      cost === 1 ? '1' : String(cost),
      ...inFlightArgv(options?.inFlight),
    ];
    if (limits.perMonth !== undefined) argv.push(String(limits.perMonth), ...this.monthArgv(options?.billingDay));
    else if (share !== undefined || releases !== undefined || lease !== undefined) argv.push(...NO_MONTH_ARGV);
    if (share !== undefined) argv.push(...this.consumerArgv(share));
    if (lease !== undefined) argv.push(...lease.argv);
    if (releases !== undefined) argv.push(...releases);
    const consumer = share === undefined ? undefined : this.names.consumer(share.id);
    const script = (lease === undefined ? this.scripts.consume : this.scripts.leaseConsume)[
      share === undefined ? 0 : 1
    ];
    let raw: number[];
    try {
      raw = await run(script, key, argv, consumer);
    } catch (err) {
      this.noteLate(sentAt, err);
      throw err;
    }
    if (lease !== undefined) lease.tail = leaseTail(raw);
    const reply = decodeDecisionReply(raw);
    this.deadline?.observe(sentAt, reply.now);
    const decision = this.decisionOf(reply, limits, cost, share);
    if (decision.outcome === 'limited' && decision.bannedNow) this.rememberBan(key, reply.bannedUntil);
    this.noteLease(options?.inFlight, decision, reply.held);
    return decision;
  }

  /** ARGV 18..24 of a consume with a consumer: its limits ('' for none) and its month's boundaries. */
  private consumerArgv(share: ConsumerShare): string[] {
    const { perMinute, perDay, perMonth } = share.limits;
    return [
      perMinute === undefined ? '' : String(perMinute),
      perDay === undefined ? '' : String(perDay),
      ...(perMonth === undefined ? NO_MONTH_ARGV : [String(perMonth), ...this.monthArgv(share.billingDay)]),
    ];
  }

  /** A consume's reply as the decision: refused by maxInFlight, the windows as they stand, read as an admission of nothing. */
  private decisionOf(
    reply: DecisionReply,
    limits: WindowLimits,
    cost: number,
    share: ConsumerShare | undefined,
  ): KeyDecision {
    const refusedForConcurrency = reply.outcome === OUTCOME_CONCURRENCY_LIMITED;
    let decision = keyDecision({
      ...keyCountsOf(reply, limits),
      outcome: refusedForConcurrency ? OUTCOME_ALLOWED : (reply.outcome as OutcomeCode),
      cost,
    });
    if (share !== undefined && reply.consumer !== undefined) {
      const counts = { ...reply.consumer, month: monthOf(reply.consumer, share.limits.perMonth) };
      decision = withConsumer(decision, consumerWindows(share, counts, reply.now), cost);
    }
    if (refusedForConcurrency && decision.outcome === 'allowed') return { ...decision, outcome: 'concurrency_limited' };
    return decision;
  }

  /** A late refusal of a consume (nothing counted) still tells the deadlines Redis's clock. */
  private noteLate(sentAt: number, err: unknown): void {
    const lateAt = CommandDeadline.lateAt(err);
    if (lateAt !== null) this.deadline?.observeLate(sentAt, lateAt);
  }

  /** `now` for a script: the test clock's, or '' (Redis TIME). */
  private now(): string {
    return this.clock === undefined ? '' : String(this.clock.now());
  }

  /** An admitted lease taken when its set held half of maxInFlight or more is released at once (isNearLimit). */
  private noteLease(lease: InFlightLease | undefined, decision: KeyDecision, held: number | undefined): void {
    if (
      lease !== undefined &&
      decision.outcome === 'allowed' &&
      held !== undefined &&
      held > 0 &&
      isNearLimit(held, lease.max)
    ) {
      this.nearLimit.add(lease.id, lease.ttlMs);
    }
  }

  release(ref: KeyRef, leaseId: string): void {
    const leasesKey = this.names.leases(ref);
    if (this.nearLimit.take(leaseId)) {
      this.releaseNow(leasesKey, leaseId);
      return;
    }
    // No round trip on a request's path: the key's next consume carries it, or the batch sends it
    // within 2 × RELEASE_FLUSH_MS; a release lost to a Redis outage is a lease that expires (its ttl).
    this.releases.add(leasesKey, leaseId);
  }

  /**
   * A ZREM of its own, not waited for (it is on no request's path): another instance must see the
   * slot free as soon as the answer ends. It takes the key's pending releases along; if it fails,
   * those go back (ZREM is idempotent) and the lease itself expires with its ttl.
   */
  private releaseNow(leasesKey: string, leaseId: string): void {
    const carried = this.releases.take(leasesKey);
    const ids = carried === undefined ? [leaseId] : [leaseId, ...carried];
    this.redis.zrem(leasesKey, ...ids).catch(() => {
      if (carried !== undefined) this.releases.putBack(leasesKey, carried);
    });
  }

  /** Sends the releases no consume has carried yet (tests; close does it too). */
  flushReleases(): Promise<void> {
    return this.releases.flush();
  }

  async addCredits(ref: KeyRef, units: number, billingDay?: number): Promise<void> {
    await this.addMonthCredits(this.names.key(ref), units, billingDay);
  }

  async addConsumerCredits(consumer: ConsumerShare, units: number): Promise<void> {
    await this.addMonthCredits(this.names.consumer(consumer.id), units, consumer.billingDay);
  }

  private async addMonthCredits(names: ConsumerRedisNames, units: number, billingDay: number | undefined) {
    await run(this.scripts.credits, names, [this.now(), String(units), '0', ...this.monthArgv(billingDay)]);
  }

  async consumerUsage(share: ConsumerShare): Promise<ConsumerWindows> {
    const perMonth = share.limits.perMonth;
    const argv = [
      this.now(),
      this.sliding && share.limits.perMinute !== undefined ? '1' : '0',
      ...(perMonth === undefined ? [] : [String(perMonth), ...this.monthArgv(share.billingDay)]),
    ];
    const reply = decodeDecisionReply(await run(this.scripts.consumerUsage, this.names.consumer(share.id), argv));
    const counts = reply.consumer!;
    return consumerWindows(share, { ...counts, month: monthOf(counts, perMonth) }, reply.now);
  }

  moveWindows(from: KeyRef, to: KeyRef): Promise<void> {
    const source = this.names.key(from);
    const target = this.names.key(to);
    if (source.hash === target.hash) return Promise.resolve();
    return this.moves.move(source, target);
  }

  /** The month boundaries around this process's present (the script picks by Redis TIME). */
  private monthArgv(billingDay: number | undefined): readonly string[] {
    return this.months.argv(this.clock?.now() ?? Date.now(), billingDay ?? DEFAULT_BILLING_DAY);
  }

  private rememberBan(key: KeyRedisNames, bannedUntil: number): void {
    // Best effort: the ban itself is already in the key's hash; only the gauge would miss it.
    this.redis.zadd(this.names.bans, bannedUntil, key.banMember).catch(() => {});
  }

  async activeBans(): Promise<number> {
    // Ends are Redis TIME; this process's clock is close enough for a gauge.
    const now = this.clock?.now() ?? Date.now();
    const bans = this.names.bans;
    const replies = await this.redis.multi().zremrangebyscore(bans, '-inf', now).zcard(bans).exec();
    const [err, count] = replies?.[1] ?? [new Error('no reply to ZCARD'), 0];
    if (err) throw err;
    return Number(count);
  }

  async usage(ref: KeyRef, limits: WindowLimits, billingDay?: number): Promise<KeyUsage> {
    const argv = [this.now()];
    if (limits.perMonth !== undefined) argv.push(String(limits.perMonth), ...this.monthArgv(billingDay));
    const reply = decodeDecisionReply(await run(this.scripts.usage, this.names.key(ref), argv));
    return keyUsage(keyCountsOf(reply, limits));
  }

  resetWindows(ref: KeyRef, windows: readonly WindowName[], billingDay?: number): Promise<WindowsHeld> {
    return this.resetAt(this.names.key(ref), windows, billingDay);
  }

  resetConsumerWindows(consumer: ConsumerShare, windows: readonly WindowName[]): Promise<WindowsHeld> {
    return this.resetAt(this.names.consumer(consumer.id), windows, consumer.billingDay);
  }

  /** One window reset (RESET_WINDOWS_SCRIPT) on a key's or a consumer's windows (its hash, log and month). */
  private async resetAt(
    names: ConsumerRedisNames,
    windows: readonly WindowName[],
    billingDay: number | undefined,
  ): Promise<WindowsHeld> {
    const flag = (window: WindowName) => (windows.includes(window) ? '1' : '0');
    const argv = [this.now(), flag('minute'), this.sliding ? '1' : '0', flag('day')];
    if (windows.includes('month')) argv.push('0', ...this.monthArgv(billingDay));
    const reply = await run(this.scripts.resetWindows, names, argv);
    const held: WindowsHeld = {};
    (['minute', 'day', 'month'] as const).forEach((window, i) => {
      if (reply[i]! >= 0) held[window] = reply[i];
    });
    return held;
  }

  async unban(ref: KeyRef): Promise<void> {
    const key = this.names.key(ref);
    await this.redis.hdel(key.hash, 'bu', 'rc', 're');
    await this.redis.zrem(this.names.bans, key.banMember);
  }

  /** Sends the pending releases; the client belongs to the caller, who quits it after. */
  close(): Promise<void> {
    return this.releases.flush();
  }
}
