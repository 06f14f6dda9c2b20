/**
 * Lua scripts of the Redis key store's backup and recovery paths (import, restore after data loss,
 * the epoch marker). Every key they touch carries the `{k}` hash tag (see redisKeyLayout), so each
 * script is atomic on a single Redis and legal on Cluster.
 *
 * Records are passed four arguments each, after the channel and an epoch candidate for the issued
 * mark: id, record JSON (encodeRecord), hash, previous hash or ''. KEYS: 1 by-hash, 2 by-id, then
 * (import) 3 writes, 4 issued, or (restore) 3 issued. Each change is published with the issued mark
 * it bumped, as every other write of a record, so the instances' filters of issued hashes
 * (keys/issued/issued-keys.ts) learn imported and restored keys like created ones.
 */

/**
 * Lua: publishes one record's change with the issued mark it bumps (redis-issued-marks.ts); expects
 * `issued`, `channel` and `epochCandidate` as locals. `removed`: the record is gone (an import
 * undone that had created it), so a durable copy forgets it rather than keeping it. `restored`: a
 * restore put it back as a durable copy held it (KeyChange.restored).
 */
const PUBLISH_WITH_MARK_LUA = `local function publish(id, h, removed, restored)
  redis.call('HSETNX', issued, 'epoch', epochCandidate)
  local seq = redis.call('HINCRBY', issued, 'seq', 1)
  local epoch = redis.call('HGET', issued, 'epoch')
  local change = {id = id, hash = h, epoch = epoch, seq = seq}
  if removed then change.removed = true end
  if restored then change.restored = true end
  redis.call('PUBLISH', channel, cjson.encode(change))
end
`;

/**
 * One batch of an import (a few hundred records, so Redis is held for a few milliseconds): brings
 * each record to exactly the given state. First every hash of the batch is checked against the
 * records that hold it now (a hash held by another id refuses the batch, and the caller undoes the
 * batches before it), and a record revoked here whose imported state is not revoked refuses it
 * too (the caller keeps revocations; this catches a revocation made meanwhile). Then records whose
 * stored JSON already equals the given one are counted unchanged; for each other one the state it
 * had ('' when it did not exist) goes into the import's journal first, then it is written,
 * dropping hashes it no longer has and publishing one change per hash touched. The script may be
 * sent again (its answer lost to a timeout): a record the journal already holds counts as written.
 *
 * A live key that enters a consumer (created in it, or moved to it from another or none) refuses
 * the batch too while that consumer is being deleted (its closed set exists, KeyStore.closeConsumer).
 *
 * KEYS: 1 by-hash, 2 by-id, 3 writes, 4 issued, 5 journal, then each record's consumer's closed set
 * (the one of no consumer '' for a record of none). ARGV: 1 channel, 2 epoch candidate, 3 journal
 * ttl ms, then four arguments a record. Returns {unchanged, ids written...} or an error naming the
 * conflict.
 */
export const IMPORT_BATCH_SCRIPT = `
local byHash, byId, issued, journal, channel, epochCandidate = KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[1], ARGV[2]
local n = (#ARGV - 3) / 4
local function arg(i, f) return ARGV[3 + 4 * i + f] end
${PUBLISH_WITH_MARK_LUA}local currents = {}
for i = 0, n - 1 do
  for f = 3, 4 do
    local h = arg(i, f)
    if h ~= '' then
      local other = redis.call('HGET', byHash, h)
      if other then
        local otherId = cjson.decode(other).id
        if otherId ~= arg(i, 1) then return redis.error_reply('ERR hash-conflict ' .. arg(i, 1) .. ' ' .. otherId) end
      end
    end
  end
  local currentHash = redis.call('HGET', byId, arg(i, 1))
  local current = currentHash and redis.call('HGET', byHash, currentHash)
  if current and current ~= arg(i, 2) and type(cjson.decode(current).revokedAt) == 'string' and type(cjson.decode(arg(i, 2)).revokedAt) ~= 'string' then
    return redis.error_reply('ERR revoked-meanwhile ' .. arg(i, 1))
  end
  if current ~= arg(i, 2) then
    local given = cjson.decode(arg(i, 2))
    local entered = type(given.consumerId) == 'string' and type(given.revokedAt) ~= 'string' and (not current or cjson.decode(current).consumerId ~= given.consumerId)
    if entered and redis.call('EXISTS', KEYS[6 + i]) == 1 then
      return redis.error_reply('ERR consumer-closed ' .. arg(i, 1) .. ' ' .. given.consumerId)
    end
  end
  currents[i] = current or false
end
local unchanged, written = 0, {}
for i = 0, n - 1 do
  local id, json, h1, h2 = arg(i, 1), arg(i, 2), arg(i, 3), arg(i, 4)
  local current = currents[i]
  if current == json then
    -- Written by this import already (a batch sent again after its answer was lost): still its write.
    if redis.call('HEXISTS', journal, id) == 1 then written[#written + 1] = id else unchanged = unchanged + 1 end
  else
    redis.call('HSETNX', journal, id, current or '')
    local touched = {}
    if current then
      local old = cjson.decode(current)
      for _, h in ipairs({old.hash, old.previousHash}) do
        if type(h) == 'string' and h ~= h1 and h ~= h2 then
          redis.call('HDEL', byHash, h)
          touched[#touched + 1] = h
        end
      end
    end
    redis.call('HSET', byHash, h1, json)
    touched[#touched + 1] = h1
    if h2 ~= '' then
      redis.call('HSET', byHash, h2, json)
      touched[#touched + 1] = h2
    end
    redis.call('HSET', byId, id, h1)
    for _, h in ipairs(touched) do publish(id, h) end
    written[#written + 1] = id
  end
end
if #written > 0 then
  redis.call('INCRBY', KEYS[3], #written)
  redis.call('PEXPIRE', journal, ARGV[3])
end
return {unchanged, unpack(written)}`;

/**
 * Undoes part of an import that failed: each given id goes back to the state its journal entry
 * holds (its former record, or nothing when the import created it), with one change published per
 * hash touched, and leaves the journal. KEYS: 1 by-hash, 2 by-id, 3 issued, 4 journal.
 * ARGV: 1 channel, 2 epoch candidate, then ids.
 */
export const UNDO_IMPORT_SCRIPT = `
local byHash, byId, issued, journal, channel, epochCandidate = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2]
${PUBLISH_WITH_MARK_LUA}for i = 3, #ARGV do
  local id = ARGV[i]
  local before = redis.call('HGET', journal, id)
  if before then
    local touched = {}
    local currentHash = redis.call('HGET', byId, id)
    local current = currentHash and redis.call('HGET', byHash, currentHash)
    if current then
      local c = cjson.decode(current)
      for _, h in ipairs({c.hash, c.previousHash}) do
        if type(h) == 'string' then
          redis.call('HDEL', byHash, h)
          touched[#touched + 1] = h
        end
      end
    end
    if before == '' then
      redis.call('HDEL', byId, id)
    else
      local b = cjson.decode(before)
      for _, h in ipairs({b.hash, b.previousHash}) do
        if type(h) == 'string' then
          redis.call('HSET', byHash, h, before)
          touched[#touched + 1] = h
        end
      end
      redis.call('HSET', byId, id, b.hash)
    end
    for _, h in ipairs(touched) do publish(id, h, before == '') end
    redis.call('HDEL', journal, id)
  end
end
return 1`;

/** The records of the given ids, in one round trip: JSON or false for each. KEYS: 1 by-id, 2 by-hash. */
export const GET_MANY_SCRIPT = `
local out = {}
for i = 1, #ARGV do
  local hash = redis.call('HGET', KEYS[1], ARGV[i])
  out[i] = hash and redis.call('HGET', KEYS[2], hash) or false
end
return out`;

/**
 * Restore after data loss: writes each record whose id and hashes are all absent, leaves every
 * other one as Redis has it (a write made since the loss is newer than the local copy). Publishes
 * the change of each record written, marked `restored`, so caches that remembered its hash as
 * unknown drop that, and caches that held the record re-read it without dropping it first.
 * Returns the ids written.
 */
export const RESTORE_MISSING_SCRIPT = `
local byHash, byId, issued, channel, epochCandidate = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 4
${PUBLISH_WITH_MARK_LUA}local restored = {}
for i = 0, n - 1 do
  local id, json, h1, h2 = ARGV[3 + 4 * i], ARGV[4 + 4 * i], ARGV[5 + 4 * i], ARGV[6 + 4 * i]
  local taken = redis.call('HEXISTS', byId, id) == 1 or redis.call('HEXISTS', byHash, h1) == 1
  if not taken and h2 ~= '' then taken = redis.call('HEXISTS', byHash, h2) == 1 end
  if not taken then
    redis.call('HSET', byHash, h1, json)
    if h2 ~= '' then redis.call('HSET', byHash, h2, json) end
    redis.call('HSET', byId, id, h1)
    publish(id, h1, false, true)
    if h2 ~= '' then publish(id, h2, false, true) end
    restored[#restored + 1] = id
  end
end
return restored`;
