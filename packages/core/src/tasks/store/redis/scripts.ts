import type { Redis } from 'ioredis';
import { OUTBOX_SCRIPTS } from './outbox-scripts.ts';

/*
 * The store's Lua scripts. Each runs atomically in Redis, so a check and the write it guards (a status
 * compare-and-set, an idempotency key, a log's trim) cannot interleave with another process's. ioredis
 * sends a script whole the first time on each connection and by its SHA after, so a Redis that restarted
 * (and forgot its scripts) is sent them again before anything else on the new connection.
 *
 * A task's hash holds its record as one field per top-level key (the value's JSON), so a patch is an
 * HSET/HDEL of its fields and no script but PUSH_TARGET parses JSON. The store's own fields start with `:`. Index names
 * are built here from the prefix, as in redis-keys.ts: which indexes a change touches is known only once
 * the script has read the task. (So the store needs one Redis, not a Cluster, whose scripts must name
 * every key up front.) Every index but `finished` and `finished-artifacts` (the finished tasks holding
 * artifacts, by finish time, for the store's cap on them) is a sorted set of members
 * `<createdAt ms, 15 digits>:<insertion seq, 15 digits>:<id>` at score 0, which Redis orders as text:
 * by creation, ties by insertion, and a member is its own list cursor.
 */

/** Statuses a task never leaves, and the index helpers every script that writes a task shares. */
const COMMON = `
local terminal = { completed = true, error = true, cancelled = true }
local function statusOf(json) return string.sub(json, 2, -2) end
local function byStatus(prefix, status, principal)
  return prefix .. 'status:' .. status, prefix .. 'principal-status:' .. status .. ':' .. principal
end
`;

/** KEYS: task, sequence, idempotency key (the task again when none). ARGV: prefix, id, principal, status, created (15 digits), finished ms or '', write-back pending '1'/'0', idempotency suffix or '', then field, json, …  */
const INSERT = `${COMMON}
local prefix, id, principal, status, created, finished, writing, suffix = unpack(ARGV, 1, 8)
if suffix ~= '' then
  local existing = redis.call('GET', KEYS[3])
  if existing then
    local fields = redis.call('HGETALL', prefix .. 'task:' .. existing)
    if #fields > 0 then return { 'existing', fields } end
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return { 'duplicate' } end
local seq = redis.call('INCR', KEYS[2])
local member = created .. ':' .. string.format('%015d', seq) .. ':' .. id
redis.call('HSET', KEYS[1], ':order', member, ':principal', principal, unpack(ARGV, 9, #ARGV))
if suffix ~= '' then
  redis.call('HSET', KEYS[1], ':idempotency', suffix)
  redis.call('SET', KEYS[3], id)
end
if finished ~= '' then redis.call('HSET', KEYS[1], ':finished', finished) end
local statusKey, principalStatusKey = byStatus(prefix, status, principal)
redis.call('ZADD', prefix .. 'tasks', 0, member)
redis.call('ZADD', prefix .. 'principal:' .. principal, 0, member)
redis.call('ZADD', statusKey, 0, member)
redis.call('ZADD', principalStatusKey, 0, member)
if terminal[status] and finished ~= '' then redis.call('ZADD', prefix .. 'finished', finished, id) end
if writing == '1' then redis.call('ZADD', prefix .. 'write-back-pending', 0, member) end
return { 'stored' }
`;

/**
 * KEYS: task. ARGV: prefix, id, from (statuses joined by spaces; '*' for any), new status ('' to keep),
 * finished ms ('' to keep, '-' for none), write-back pending ('1', '0', '' to keep), how many fields to
 * delete, those fields, then field, json, … to set. Answers the task's fields, or nil when it is missing
 * or its status is not one of `from`.
 */
const CHANGE = `${COMMON}
local prefix, id, from, status, finished, writing = unpack(ARGV, 1, 6)
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return false end
current = statusOf(current)
if from ~= '*' and not string.find(' ' .. from .. ' ', ' ' .. current .. ' ', 1, true) then return false end
local deletes = tonumber(ARGV[7])
if deletes > 0 then redis.call('HDEL', KEYS[1], unpack(ARGV, 8, 7 + deletes)) end
if #ARGV > 7 + deletes then redis.call('HSET', KEYS[1], unpack(ARGV, 8 + deletes, #ARGV)) end
local member = redis.call('HGET', KEYS[1], ':order')
local principal = redis.call('HGET', KEYS[1], ':principal')
if status == '' then status = current end
if status ~= current then
  local oldStatusKey, oldPrincipalStatusKey = byStatus(prefix, current, principal)
  local statusKey, principalStatusKey = byStatus(prefix, status, principal)
  redis.call('ZREM', oldStatusKey, member)
  redis.call('ZREM', oldPrincipalStatusKey, member)
  redis.call('ZADD', statusKey, 0, member)
  redis.call('ZADD', principalStatusKey, 0, member)
end
if finished == '-' then redis.call('HDEL', KEYS[1], ':finished') elseif finished ~= '' then redis.call('HSET', KEYS[1], ':finished', finished) end
local finishedAt = redis.call('HGET', KEYS[1], ':finished')
if terminal[status] and finishedAt then redis.call('ZADD', prefix .. 'finished', finishedAt, id) else redis.call('ZREM', prefix .. 'finished', id) end
if terminal[status] and finishedAt and redis.call('EXISTS', prefix .. 'artifacts:' .. id) == 1 then
  redis.call('ZADD', prefix .. 'finished-artifacts', finishedAt, id)
else
  redis.call('ZREM', prefix .. 'finished-artifacts', id)
end
if writing == '1' then redis.call('ZADD', prefix .. 'write-back-pending', 0, member) elseif writing == '0' then redis.call('ZREM', prefix .. 'write-back-pending', member) end
return redis.call('HGETALL', KEYS[1])
`;

/** KEYS: idempotency key. ARGV: prefix. Answers the fields of the task it names, or nil. */
const LOOKUP = `
local id = redis.call('GET', KEYS[1])
if not id then return false end
return redis.call('HGETALL', ARGV[1] .. 'task:' .. id)
`;

/** KEYS: an index. ARGV: prefix, cursor member ('' for the newest), how many. Answers total, then member, fields, … newest first. */
const LIST = `
local answer = { redis.call('ZCARD', KEYS[1]) }
local upper = ARGV[2] == '' and '+' or '(' .. ARGV[2]
for _, member in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[1], upper, '-', 'LIMIT', 0, tonumber(ARGV[3]))) do
  answer[#answer + 1] = member
  answer[#answer + 1] = redis.call('HGETALL', ARGV[1] .. 'task:' .. string.sub(member, 33))
end
return answer
`;

/** KEYS: the five status indexes. Answers their sizes. */
const COUNTS = `
local answer = {}
for index, key in ipairs(KEYS) do answer[index] = redis.call('ZCARD', key) end
return answer
`;

/** KEYS: pending, running, write-back-pending indexes. ARGV: prefix. Answers member, fields, … of each task in them once. */
const UNFINISHED = `
local answer, seen = {}, {}
for _, key in ipairs(KEYS) do
  for _, member in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    if not seen[member] then
      seen[member] = true
      answer[#answer + 1] = member
      answer[#answer + 1] = redis.call('HGETALL', ARGV[1] .. 'task:' .. string.sub(member, 33))
    end
  end
end
return answer
`;

/**
 * KEYS: finished. ARGV: prefix, before (ms), at most how many. Deletes those tasks with everything they own
 * (their artifacts' bytes taken off the store's count); answers their fields.
 */
const EVICT = `${COMMON}
local prefix = ARGV[1]
local answer = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))) do
  redis.call('ZREM', KEYS[1], id)
  local task = prefix .. 'task:' .. id
  local fields = redis.call('HGETALL', task)
  if #fields > 0 then
    local status = statusOf(redis.call('HGET', task, 'status'))
    local member = redis.call('HGET', task, ':order')
    local principal = redis.call('HGET', task, ':principal')
    local statusKey, principalStatusKey = byStatus(prefix, status, principal)
    for _, key in ipairs({ prefix .. 'tasks', prefix .. 'principal:' .. principal, statusKey, principalStatusKey, prefix .. 'write-back-pending' }) do
      redis.call('ZREM', key, member)
    end
    local suffix = redis.call('HGET', task, ':idempotency')
    if suffix then
      local key = prefix .. 'idempotency:' .. suffix
      if redis.call('GET', key) == id then redis.call('DEL', key) end
    end
    local held = redis.call('HGET', prefix .. 'artifacts:' .. id, ':bytes')
    if held then redis.call('DECRBY', prefix .. 'artifact-bytes', held) end
    redis.call('ZREM', prefix .. 'finished-artifacts', id)
    redis.call('DEL', task, prefix .. 'log:' .. id, prefix .. 'checkpoint:' .. id, prefix .. 'messages:' .. id, prefix .. 'artifacts:' .. id)
    answer[#answer + 1] = fields
  end
end
return answer
`;

/**
 * KEYS: task, log. ARGV: the entry's time and type as JSON, its data's JSON (already cut to the entry
 * bound), the log's byte bound. Appends the entry as BoundedLog does: the JSON it counts is the JSON it
 * stores, and the oldest entries go (never the newest) while the log holds more than its bound.
 */
const APPEND = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local seq = redis.call('HINCRBY', KEYS[1], ':log-last', 1)
local entry = '{"seq":' .. string.format('%d', seq) .. ',"time":' .. ARGV[1] .. ',"type":' .. ARGV[2] .. ',"data":' .. ARGV[3] .. '}'
redis.call('XADD', KEYS[2], string.format('%d-0', seq), 'e', entry)
local bytes = redis.call('HINCRBY', KEYS[1], ':log-bytes', #entry)
local bound = tonumber(ARGV[4])
if bytes <= bound then return seq end
local first = tonumber(redis.call('HGET', KEYS[1], ':log-first') or '1')
while bytes > bound and first < seq do
  local batch = redis.call('XRANGE', KEYS[2], string.format('%d-0', first), '+', 'COUNT', 64)
  if #batch == 0 then break end
  for _, item in ipairs(batch) do
    local itemSeq = tonumber(string.match(item[1], '^%d+'))
    if bytes <= bound or itemSeq >= seq then break end
    bytes = bytes - #item[2][2]
    first = itemSeq + 1
  end
end
redis.call('XTRIM', KEYS[2], 'MINID', string.format('%d-0', first))
redis.call('HSET', KEYS[1], ':log-first', first, ':log-bytes', bytes)
return seq
`;

/**
 * KEYS: task, log. ARGV: 'read' or 'tail', after (for read), how many to read (-1 for all), how many from
 * the end (for tail: after is then the last seq less that). Answers nil when the task is not kept, else
 * the log's first and last seq, then the JSON of the entries read, oldest first.
 */
const READ = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local window = redis.call('HMGET', KEYS[1], ':log-first', ':log-last')
local first, last = tonumber(window[1] or '1'), tonumber(window[2] or '0')
local answer = { first, last }
local limit = tonumber(ARGV[3])
if limit == 0 then return answer end
local after = ARGV[1] == 'tail' and math.max(0, last - tonumber(ARGV[4])) or tonumber(ARGV[2])
local start = string.format('%d-0', math.max(math.floor(after) + 1, first))
local entries = limit < 0 and redis.call('XRANGE', KEYS[2], start, '+') or redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', limit)
for _, item in ipairs(entries) do answer[#answer + 1] = item[2][2] end
return answer
`;

/**
 * KEYS: task, checkpoint, messages. ARGV: the version the caller's messages were saved as, how many of the
 * stored messages to keep, this save's version, the state's JSON, the message count, then the messages to
 * add. Keeping some needs the stored version to be the caller's: else the messages are another save's
 * (another process's), and the answer is 'conflict' so the caller sends them all.
 */
const SAVE_CHECKPOINT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local keep = tonumber(ARGV[2])
if keep > 0 and redis.call('HGET', KEYS[2], 'version') ~= ARGV[1] then return 'conflict' end
if keep == 0 then redis.call('DEL', KEYS[3]) else redis.call('LTRIM', KEYS[3], 0, keep - 1) end
for from = 6, #ARGV, 1000 do redis.call('RPUSH', KEYS[3], unpack(ARGV, from, math.min(from + 999, #ARGV))) end
redis.call('HSET', KEYS[2], 'state', ARGV[4], 'count', ARGV[5], 'version', ARGV[3])
return 'saved'
`;

/** KEYS: checkpoint, messages. Answers nil, or the state's JSON, the version, then the messages' JSON. */
const LOAD_CHECKPOINT = `
local saved = redis.call('HMGET', KEYS[1], 'state', 'count', 'version')
if not saved[1] then return false end
local answer = { saved[1], saved[3] }
for _, message in ipairs(redis.call('LRANGE', KEYS[2], 0, tonumber(saved[2]) - 1)) do answer[#answer + 1] = message end
return answer
`;

/**
 * KEYS: task, artifacts, artifact-bytes (the store's count), finished-artifacts. ARGV: prefix, the task's id,
 * the artifact's id, its info's JSON, its text, '1' when an original follows ('0' when not), the original
 * (or ''), the bytes it counts, the task's cap, the store's cap. Keeps the artifact only while the task is
 * kept (one saved as its task is evicted must not outlive it), and only under both caps: past the store's,
 * the artifacts of the other finished tasks go first, finished first, a task's at a time, and none when
 * even all of them would not make room. Its task's count is the artifacts hash's `:bytes`. Answers
 * `kept`, `gone` (no such task), `task` and the task's count, or `store`, the store's count and what
 * dropping every other finished task's artifacts would free.
 */
const SAVE_ARTIFACT = `${COMMON}
local prefix, taskId, id, info, text, hasOriginal, original, bytes = unpack(ARGV, 1, 8)
if redis.call('EXISTS', KEYS[1]) == 0 then return { 'gone' } end
local size, perTask, inAll = tonumber(bytes), tonumber(ARGV[9]), tonumber(ARGV[10])
local kept = tonumber(redis.call('HGET', KEYS[2], ':bytes') or '0')
if kept + size > perTask then return { 'task', kept } end
local used = tonumber(redis.call('GET', KEYS[3]) or '0')
if used + size > inAll then
  local finished, evictable = {}, 0
  for _, other in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    if other ~= taskId then
      local held = redis.call('HGET', prefix .. 'artifacts:' .. other, ':bytes') or '0'
      finished[#finished + 1] = { other, held }
      evictable = evictable + tonumber(held)
    end
  end
  if used - evictable + size > inAll then return { 'store', used, evictable } end
  for _, other in ipairs(finished) do
    if used + size <= inAll then break end
    redis.call('DEL', prefix .. 'artifacts:' .. other[1])
    redis.call('ZREM', KEYS[4], other[1])
    redis.call('DECRBY', KEYS[3], other[2])
    used = used - tonumber(other[2])
  end
end
redis.call('HSET', KEYS[2], id .. ':info', info, id .. ':text', text)
if hasOriginal == '1' then redis.call('HSET', KEYS[2], id .. ':original', original) end
redis.call('HINCRBY', KEYS[2], ':bytes', bytes)
redis.call('INCRBY', KEYS[3], bytes)
local finishedAt = redis.call('HGET', KEYS[1], ':finished')
if terminal[statusOf(redis.call('HGET', KEYS[1], 'status'))] and finishedAt then redis.call('ZADD', KEYS[4], finishedAt, taskId) end
return { 'kept' }
`;

/**
 * KEYS: artifacts. ARGV: the artifact's id, the first byte, the byte after the last. Bytes of the artifact's
 * text, or nil when the task has no such artifact: only they cross the network. (The text is a field of the
 * artifacts hash, which GETRANGE cannot reach: Redis copies the value into the script to cut it.)
 */
const LOAD_ARTIFACT_RANGE = `
local text = redis.call('HGET', KEYS[1], ARGV[1] .. ':text')
if not text then return false end
local from, to = tonumber(ARGV[2]), tonumber(ARGV[3])
if to <= from then return '' end
return string.sub(text, from + 1, to)
`;

/**
 * KEYS: task. ARGV: a target's id, then to add: the target's JSON and how many others the task may have; to
 * remove: nothing more. Reads the task's `push` field (a JSON array), changes it and writes it back in one
 * step, so that concurrent changes of one task's targets all apply. Answers `changed` and the task's fields,
 * `full` and how many others it has, or nil when the task is missing. (cjson writes `/` as `\/`, which JSON
 * reads back alike; an empty list is deleted, since cjson would write it as `{}`.)
 */
const PUSH_TARGET = `
if redis.call('HEXISTS', KEYS[1], 'status') == 0 then return false end
local id, adding, max = ARGV[1], ARGV[2], tonumber(ARGV[3])
local current = redis.call('HGET', KEYS[1], 'push')
local kept, dropped = {}, false
if current then
  for _, target in ipairs(cjson.decode(current)) do
    if target.id == id then dropped = true else kept[#kept + 1] = target end
  end
end
if adding then
  if #kept >= max then return { 'full', #kept } end
  kept[#kept + 1] = cjson.decode(adding)
elseif not dropped then
  return { 'changed', redis.call('HGETALL', KEYS[1]) }
end
if #kept == 0 then redis.call('HDEL', KEYS[1], 'push') else redis.call('HSET', KEYS[1], 'push', cjson.encode(kept)) end
return { 'changed', redis.call('HGETALL', KEYS[1]) }
`;

/** The scripts as ioredis's `scripts` option defines them: each becomes a method of the client. */
export const REDIS_SCRIPTS = {
  klymInsert: { lua: INSERT, numberOfKeys: 3 },
  klymChange: { lua: CHANGE, numberOfKeys: 1 },
  klymLookup: { lua: LOOKUP, numberOfKeys: 1, readOnly: true },
  klymList: { lua: LIST, numberOfKeys: 1, readOnly: true },
  // One key per status (`TASK_STATUSES`).
  klymCounts: { lua: COUNTS, numberOfKeys: 6, readOnly: true },
  klymUnfinished: { lua: UNFINISHED, numberOfKeys: 3, readOnly: true },
  klymEvict: { lua: EVICT, numberOfKeys: 1 },
  klymAppend: { lua: APPEND, numberOfKeys: 2 },
  klymRead: { lua: READ, numberOfKeys: 2, readOnly: true },
  klymSaveCheckpoint: { lua: SAVE_CHECKPOINT, numberOfKeys: 3 },
  klymLoadCheckpoint: { lua: LOAD_CHECKPOINT, numberOfKeys: 2, readOnly: true },
  klymSaveArtifact: { lua: SAVE_ARTIFACT, numberOfKeys: 4 },
  klymLoadArtifactRange: { lua: LOAD_ARTIFACT_RANGE, numberOfKeys: 1, readOnly: true },
  klymPushTarget: { lua: PUSH_TARGET, numberOfKeys: 1 },
  ...OUTBOX_SCRIPTS,
} as const;

/** A reply of a script: Lua tables become arrays, strings strings, integers numbers, nil and false `null`. */
export type ScriptReply = null | string | number | ScriptReply[];

type ScriptArgument = string | number;

/** The client's methods that {@link REDIS_SCRIPTS} defines: KEYS first, then ARGV. */
export type RedisScripts = { readonly [name in keyof typeof REDIS_SCRIPTS]: (...keysThenArgs: ScriptArgument[]) => Promise<ScriptReply> };

/** `client`'s script methods; it must have been made with `scripts: REDIS_SCRIPTS`. */
export const scriptsOf = (client: Redis): RedisScripts => client as unknown as RedisScripts;
