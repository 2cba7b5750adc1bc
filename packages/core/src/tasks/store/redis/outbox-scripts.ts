/*
 * The outbox's Lua scripts (see scripts.ts for how the store's scripts run). A message is a hash
 * (`webhook:<id>`: taskId, endpoint, type, payload, createdAt, attempts, nextAttemptAt, lease) and a member
 * of the sorted set `webhooks:due`, scored by when it is due — while a claim holds it, by when that claim's
 * lease ends, so a message whose process died is due again then. A claim and a settle are each one script:
 * of two processes claiming at once, one gets a message; a settle applies only with the lease it claimed.
 */

/** KEYS: message hash, due set. ARGV: id, due (ms), then field, value, … Stores the message unless its id is stored; answers 1 when it did. */
const ADD = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3, #ARGV))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
`;

/** KEYS: due set. ARGV: prefix, now (ms), lease end (ms), at most how many, then one lease token per message. Answers the fields of each message claimed. */
const CLAIM = `
local prefix, now, leaseUntil, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local answer = {}
for index, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)) do
  local key = prefix .. 'webhook:' .. id
  if redis.call('EXISTS', key) == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    redis.call('HSET', key, 'lease', ARGV[4 + index])
    redis.call('ZADD', KEYS[1], leaseUntil, id)
    local fields = redis.call('HGETALL', key)
    fields[#fields + 1] = 'id'
    fields[#fields + 1] = id
    answer[#answer + 1] = fields
  end
end
return answer
`;

/** KEYS: message hash, due set. ARGV: id, lease, then 'done', or attempts and due (ms). Answers 1 when the lease was the stored one and the settle applied. */
const SETTLE = `
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then return 0 end
if ARGV[3] == 'done' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], 'attempts', ARGV[3], 'nextAttemptAt', ARGV[4], 'lease', '')
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
return 1
`;

/** KEYS: due set. ARGV: ids. Answers, for each id, when it is due ('' when it is not stored). */
const DUE = `
local answer = {}
for index, id in ipairs(ARGV) do answer[index] = redis.call('ZSCORE', KEYS[1], id) or '' end
return answer
`;

/** The outbox's scripts, as ioredis's `scripts` option defines them. */
export const OUTBOX_SCRIPTS = {
  klymOutboxAdd: { lua: ADD, numberOfKeys: 2 },
  klymOutboxClaim: { lua: CLAIM, numberOfKeys: 1 },
  klymOutboxSettle: { lua: SETTLE, numberOfKeys: 2 },
  klymOutboxDue: { lua: DUE, numberOfKeys: 1 },
} as const;
