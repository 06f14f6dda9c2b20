/**
 * The refusal half of a consume, shared by the key's script and the consumer scripts (bans stay per
 * key): counts the refusal toward a ban (unless shadowed, ARGV[7] = '1') and bans the key past the
 * threshold. Expects `key`, `now`, `f` (with rc, re at `rcAt`, `rcAt` + 1), `mc`, `dc`, `ttl`,
 * `minuteResetAt`, `oc`, `ok`, `me` and `ms` in scope; `replyTail` is appended to every reply (the
 * consumer scripts add the consumer's counts).
 */
export function refusalLua(rcAt: number, replyTail = ''): string {
  const tail = replyTail === '' ? '' : `, ${replyTail}`;
  return `if ARGV[7] == '1' then
  return {1, now, mc, dc, 0, minuteResetAt, oc, ok, me, ms${tail}}
end
local rc = 1
local re = tonumber(f[${rcAt + 1}]) or 0
if re > now then
  rc = (tonumber(f[${rcAt}]) or 0) + 1
else
  re = now + tonumber(ARGV[4])
end
if rc > tonumber(ARGV[3]) then
  local bannedUntil = now + tonumber(ARGV[5])
  redis.call('HSET', key, 'bu', bannedUntil)
  redis.call('HDEL', key, 'rc', 're')
  redis.call('PEXPIRE', key, ttl)
  return {3, now, mc, dc, bannedUntil, minuteResetAt, oc, ok, me, ms${tail}}
end
redis.call('HSET', key, 'rc', rc, 're', re)
redis.call('PEXPIRE', key, ttl)
return {1, now, mc, dc, 0, minuteResetAt, oc, ok, me, ms${tail}}`;
}
