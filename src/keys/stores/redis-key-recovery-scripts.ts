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
 * Brings every record to exactly the given state, all or nothing: first every hash is checked
 * against the records that hold it now (a hash held by another id refuses the whole import), then
 * records whose stored JSON already equals the given one are counted unchanged and the others
 * written, dropping hashes they no longer have and publishing one change per hash touched.
 * Returns {imported, unchanged} or an error naming the conflicting ids.
 */
/**
 * Lua: publishes one record's change with the issued mark it bumps (redis-issued-marks.ts); expects
 * `issued`, `channel` and `epochCandidate` as locals.
 */
const PUBLISH_WITH_MARK_LUA = `local function publish(id, h)
  redis.call('HSETNX', issued, 'epoch', epochCandidate)
  local seq = redis.call('HINCRBY', issued, 'seq', 1)
  local epoch = redis.call('HGET', issued, 'epoch')
  redis.call('PUBLISH', channel, cjson.encode({id = id, hash = h, epoch = epoch, seq = seq}))
end
`;

export const IMPORT_SCRIPT = `
local byHash, byId, issued, channel, epochCandidate = KEYS[1], KEYS[2], KEYS[4], ARGV[1], ARGV[2]
local n = (#ARGV - 2) / 4
local function arg(i, f) return ARGV[2 + 4 * i + f] end
${PUBLISH_WITH_MARK_LUA}for i = 0, n - 1 do
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
end
local imported, unchanged = 0, 0
for i = 0, n - 1 do
  local id, json, h1, h2 = arg(i, 1), arg(i, 2), arg(i, 3), arg(i, 4)
  local touched = {}
  local currentHash = redis.call('HGET', byId, id)
  local current = currentHash and redis.call('HGET', byHash, currentHash)
  if current == json then
    unchanged = unchanged + 1
  else
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
    imported = imported + 1
  end
end
if imported > 0 then redis.call('INCRBY', KEYS[3], imported) end
return {imported, unchanged}`;

/**
 * Restore after data loss: writes each record whose id and hashes are all absent, leaves every
 * other one as Redis has it (a write made since the loss is newer than the local copy). Publishes
 * the change of each record written, so caches that remembered its hash as unknown drop that.
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
    publish(id, h1)
    if h2 ~= '' then publish(id, h2) end
    restored[#restored + 1] = id
  end
end
return restored`;

/** {marker present (1/0), number of key records, writes counter}: the loss check, one round trip. */
export const HEALTH_SCRIPT = `
return {redis.call('EXISTS', KEYS[1]), redis.call('HLEN', KEYS[2]), tonumber(redis.call('GET', KEYS[3]) or '0')}`;

/** Releases the restore lock only if it is still ours (it may have expired and been taken). */
export const UNLOCK_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;
