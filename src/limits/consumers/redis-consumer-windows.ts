import type { Clock } from '../../shared/clock';
import type { RedisClient } from '../../shared/redis/redis';
import { defineLuaScript, type LuaCaller } from '../../shared/redis/lua-script';
import { DEFAULT_BILLING_DAY } from '../../shared/constants';
import { consumerWindows, withConsumer, type ConsumerCounts } from './consumer-decision';
import type { MonthBoundaries, MonthCount } from '../windows/month-window';
import {
  CONSUMER_CONSUME_LUA,
  CONSUMER_USAGE_LUA,
  MOVE_WINDOWS_LUA,
  SLIDING_CONSUMER_CONSUME_LUA,
} from './redis-consumer-scripts';
import type { ConsumerShare, ConsumerWindows, KeyDecision, WindowLimits } from '../types';
import { OUTCOME_ALLOWED, keyDecision, type OutcomeCode } from '../windows/windows';
import { OUTCOME_CONCURRENCY_LIMITED } from '../in-flight/redis-in-flight';
import type { KeyRedisNames, RedisNames } from '../redis/redis-names';

type ConsumeReply = [
  OutcomeCode | typeof OUTCOME_CONCURRENCY_LIMITED,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  number,
  held?: number,
];
type UsageReply = [number, number, number, number, number, number, number, number];

const CONSUME = defineLuaScript<ConsumeReply>('asgConsumerLimitConsume', CONSUMER_CONSUME_LUA, 5);
const SLIDING_CONSUME = defineLuaScript<ConsumeReply>(
  'asgConsumerLimitSlidingConsume',
  SLIDING_CONSUMER_CONSUME_LUA,
  7,
);
const USAGE = defineLuaScript<UsageReply>('asgConsumerLimitUsage', CONSUMER_USAGE_LUA, 3);
const MOVE = defineLuaScript<number>('asgKeyWindowsMove', MOVE_WINDOWS_LUA, 3);

export interface ConsumerWindowsSettings {
  names: RedisNames;
  sliding: boolean;
  clock: Clock | undefined;
  months: MonthBoundaries;
}

/** The consumer half of the Redis key limiter: decisions with a consumer's windows, its usage and credits, moves. */
export class RedisConsumerWindows {
  private readonly scripts: {
    consume: LuaCaller<ConsumeReply>;
    slidingConsume: LuaCaller<ConsumeReply>;
    usage: LuaCaller<UsageReply>;
    move: LuaCaller<number>;
  };

  constructor(
    redis: RedisClient,
    private readonly settings: ConsumerWindowsSettings,
  ) {
    this.scripts = {
      consume: CONSUME.on(redis),
      slidingConsume: SLIDING_CONSUME.on(redis),
      usage: USAGE.on(redis),
      move: MOVE.on(redis),
    };
  }

  private monthArgv(billingDay: number | undefined): readonly string[] {
    return this.settings.months.argv(this.settings.clock?.now() ?? Date.now(), billingDay ?? DEFAULT_BILLING_DAY);
  }

  /**
   * One script call: the key's windows, ban and in-flight lease (`keyArgv`, ARGV 1..12 of the key's
   * script) and the consumer's, the lease releases it carries removed first. Returns the decision, the ban's end (0 for none)
   * and, admitted, the leases the key's set holds with its own (0 without maxInFlight; undefined when refused).
   */
  async consume(
    key: KeyRedisNames,
    keyArgv: string[],
    limits: WindowLimits,
    share: ConsumerShare,
    billingDay: number | undefined,
    cost: number,
    releases?: readonly string[],
  ): Promise<[KeyDecision, number, number | undefined]> {
    const consumer = this.settings.names.consumer(share.id);
    const { perMinute, perDay, perMonth } = share.limits;
    const argv = [
      ...keyArgv,
      limits.perMonth === undefined ? '' : String(limits.perMonth),
      ...(limits.perMonth === undefined ? ['', '', '', ''] : this.monthArgv(billingDay)),
      perMinute === undefined ? '' : String(perMinute),
      perDay === undefined ? '' : String(perDay),
      perMonth === undefined ? '' : String(perMonth),
      ...(perMonth === undefined ? ['', '', '', ''] : this.monthArgv(share.billingDay)),
    ];
    if (releases !== undefined) argv.push(...releases);
    const reply = this.settings.sliding
      ? await this.scripts.slidingConsume(
          [key.hash, key.log, key.month, key.leases, consumer.hash, consumer.log, consumer.month],
          argv,
        )
      : await this.scripts.consume([key.hash, key.month, key.leases, consumer.hash, consumer.month], argv);
    const month = limits.perMonth === undefined ? null : monthCountOf(reply[6], reply[7], reply[8], reply[9]);
    const refusedForConcurrency = reply[0] === OUTCOME_CONCURRENCY_LIMITED;
    // Refused by maxInFlight: the windows as they stand, read as an admission of nothing.
    const decision = keyDecision({
      outcome: refusedForConcurrency ? OUTCOME_ALLOWED : (reply[0] as OutcomeCode),
      now: reply[1],
      minuteCount: reply[2],
      dayCount: reply[3],
      bannedUntil: reply[4],
      limits,
      minuteResetAt: reply[5] || undefined,
      cost,
      month,
    });
    const counts: ConsumerCounts = {
      minuteCount: reply[10],
      dayCount: reply[11],
      minuteResetAt: reply[16],
      month: perMonth === undefined ? null : monthCountOf(reply[12], reply[13], reply[14], reply[15]),
    };
    const decided = withConsumer(decision, consumerWindows(share, counts, reply[1]), cost);
    if (refusedForConcurrency && decided.outcome === 'allowed')
      return [{ ...decided, outcome: 'concurrency_limited' }, 0, undefined];
    return [decided, reply[4], reply[17]];
  }

  async usage(share: ConsumerShare): Promise<ConsumerWindows> {
    const consumer = this.settings.names.consumer(share.id);
    const perMonth = share.limits.perMonth;
    const argv = [
      this.settings.clock === undefined ? '' : String(this.settings.clock.now()),
      this.settings.sliding && share.limits.perMinute !== undefined ? '1' : '0',
      perMonth === undefined ? '' : String(perMonth),
      ...(perMonth === undefined ? ['', '', '', ''] : this.monthArgv(share.billingDay)),
    ];
    const r = await this.scripts.usage([consumer.hash, consumer.log, consumer.month], argv);
    return consumerWindows(
      share,
      {
        minuteCount: r[1],
        dayCount: r[2],
        minuteResetAt: r[3],
        month: perMonth === undefined ? null : monthCountOf(r[4], r[5], r[6], r[7]),
      },
      r[0],
    );
  }

  /**
   * Copies the windows under `from` into `to` (adding), then deletes `from`. Two places in two slots
   * on a Cluster: a read, a script at the target, a delete; a request counted at `from` in between
   * is carried by the second move the caller makes a little later (consumer-moves.ts).
   */
  async move(redis: RedisClient, from: KeyRedisNames, to: KeyRedisNames): Promise<void> {
    const replies = await redis
      .multi()
      .hgetall(from.hash)
      .pttl(from.hash)
      .hgetall(from.month)
      .pttl(from.month)
      .zrange(from.log, '0', '-1', 'WITHSCORES')
      .exec();
    if (!replies) return;
    const [hash, hashTtl, month, monthTtl, log] = replies.map(([err, value]) => {
      if (err) throw err;
      return value;
    }) as [Record<string, string>, number, Record<string, string>, number, string[]];
    const fields = Object.entries(hash).flatMap(([k, v]) => [k, v]);
    if (hashTtl > 0) fields.push('pttl', String(hashTtl));
    const monthArg =
      month.w === undefined ? '' : [month.w, month.c ?? '0', month.k ?? '0', String(Math.max(monthTtl, 0))].join(',');
    const logPairs: string[] = [];
    for (let i = 0; i < log.length; i += 2) logPairs.push(log[i + 1]!, 'moved-' + log[i]!);
    if (fields.length === 0 && monthArg === '' && logPairs.length === 0) return;
    await this.scripts.move([to.hash, to.month, to.log], [fields.join(','), monthArg, ...logPairs]);
    await redis.del(from.hash);
    await redis.del(from.month);
    await redis.del(from.log);
  }
}

function monthCountOf(count: number, credits: number, resetAt: number, startAt: number): MonthCount {
  return { count, credits, resetAt, startAt };
}
