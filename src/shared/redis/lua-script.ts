import type { RedisClient } from './redis';

/** What a script receives in ARGV; Redis turns numbers into strings. */
export type LuaArg = string | number;

/** A script bound to one client: its keys (KEYS) and arguments (ARGV), its reply typed. */
export type LuaCaller<Reply> = (keys: readonly string[], args?: readonly LuaArg[]) => Promise<Reply>;

/** A Lua script defined once per module: `on(redis)` gives the caller for a client. */
export interface LuaScript<Reply> {
  readonly name: string;
  /** How many of a call's first arguments are keys; undefined when each call says (`keys.length`). */
  readonly numberOfKeys: number | undefined;
  on(redis: RedisClient): LuaCaller<Reply>;
}

/** What a script was defined with; see definedLuaScripts. */
export interface DefinedLuaScript {
  name: string;
  source: string;
  numberOfKeys: number | undefined;
}

/** Every script defined in this process, by name (each module defines its own when it is loaded). */
const defined = new Map<string, DefinedLuaScript>();

/**
 * The scripts defined so far. For the test that runs them all and checks that each names in KEYS
 * every key it touches (test/integration/redis-production/script-keys.test.ts, docs/redis.md).
 */
export function definedLuaScripts(): DefinedLuaScript[] {
  return [...defined.values()];
}

/** The ioredis command a script becomes: numkeys first when the script does not fix it. */
type DefinedCommand = (...keysAndArgs: LuaArg[]) => Promise<unknown>;

/**
 * The one way the product runs Lua on Redis. The script becomes an ioredis command (`defineCommand`),
 * which sends EVALSHA and falls back to EVAL once when the server has not cached the script (after
 * a restart or a failover), and works alike on a single node and a cluster (every key of one call
 * must then share a hash slot, which each store's key layout sees to).
 *
 * `name` must be unique across the product: it names the command on the shared client. A script
 * with a fixed `numberOfKeys` refuses a call with another count (a mistake, never a runtime state).
 *
 * A script touches only the keys it is given in KEYS: it builds no key name of its own. Redis
 * documents this rule, a Cluster needs it to route the call, and servers such as Dragonfly refuse
 * an undeclared key by default (docs/redis.md).
 */
export function defineLuaScript<Reply>(name: string, source: string, numberOfKeys?: number): LuaScript<Reply> {
  defined.set(name, { name, source, numberOfKeys });
  return {
    name,
    numberOfKeys,
    on(redis: RedisClient): LuaCaller<Reply> {
      redis.defineCommand(name, numberOfKeys === undefined ? { lua: source } : { numberOfKeys, lua: source });
      const command = (redis as unknown as Record<string, DefinedCommand>)[name]!.bind(redis);
      return (keys, args = []) => {
        if (numberOfKeys === undefined) return command(keys.length, ...keys, ...args) as Promise<Reply>;
        if (keys.length !== numberOfKeys)
          return Promise.reject(new Error(`Lua script ${name} takes ${numberOfKeys} keys, was given ${keys.length}`));
        return command(...keys, ...args) as Promise<Reply>;
      };
    },
  };
}
