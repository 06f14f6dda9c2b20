import type { IssuedMark, StoreIssuedMark } from '../types';

/**
 * The Redis side of the issued-hash filter (see keys/issued/issued-keys.ts): a HASH `<ns>:keys:{k}:issued` with
 * `epoch` (a random id, set by whichever instance writes first) and `seq` (bumped by every script
 * that writes a record, in the same script that writes it and publishes the change). Same `{k}` tag
 * as the records, so one script reaches all of them on Cluster too.
 */

/**
 * Lua lines that bump the mark; expect `issuedKey` (KEYS entry) and `epochCandidate` (ARGV entry)
 * and leave `epoch` and `seq` as locals for the PUBLISH that follows.
 */
export function bumpIssuedMarkLua(issuedKey: string, epochCandidate: string): string {
  return `
redis.call('HSETNX', ${issuedKey}, 'epoch', ${epochCandidate})
local seq = redis.call('HINCRBY', ${issuedKey}, 'seq', 1)
local epoch = redis.call('HGET', ${issuedKey}, 'epoch')`;
}

/**
 * Starts the mark where there is none yet (first use, or its data lost) and returns it; the usual read
 * is a plain HMGET. KEYS: 1 issued. ARGV: 1 epoch candidate. Returns {epoch, seq}.
 */
export const START_ISSUED_MARK_SCRIPT = `
redis.call('HSETNX', KEYS[1], 'epoch', ARGV[1])
local mark = redis.call('HMGET', KEYS[1], 'epoch', 'seq')
return {mark[1], mark[2] or '0'}`;

/**
 * One HSCAN step over by-hash that returns the fields only ({cursor, hash, hash, ...}): the records
 * stay in Redis, so a rebuild moves 64 bytes per key, not the record's JSON. Redis 7.4's NOVALUES
 * would do the same without a script; this works on 6 and 7.0 too.
 * KEYS: 1 by-hash. ARGV: 1 cursor, 2 COUNT.
 */
export const SCAN_HASHES_SCRIPT = `
local page = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local out = {page[1]}
local entries = page[2]
for i = 1, #entries, 2 do out[#out + 1] = entries[i] end
return out`;

/** Entries asked of HSCAN per round trip during a rebuild: bounded replies, a few ms of Redis each. */
export const SCAN_BATCH = 1000;

/** {epoch, seq} as HMGET or the script returns them; null when there is no epoch yet. */
export function parseIssuedMark(reply: unknown): StoreIssuedMark | null {
  const [epoch, seq] = reply as [unknown, unknown];
  if (typeof epoch !== 'string') return null;
  return { epoch, seq: Number(seq ?? 0) };
}

/** The mark carried by a published change, if it has a valid one. */
export function markOfMessage(message: { epoch?: unknown; seq?: unknown }): IssuedMark | undefined {
  if (typeof message.epoch !== 'string' || typeof message.seq !== 'number' || !Number.isInteger(message.seq))
    return undefined;
  return { epoch: message.epoch, seq: message.seq };
}
