import type { Redis } from 'ioredis';
import { scoreAbovePriority, type BullmqLayout } from './bullmq-layout.ts';

/*
 * A principal's turns and running slots on a shared queue (issue #33), kept beside BullMQ's keys of the
 * queue, under `<prefix>:<name>:principal:`. BullMQ orders the jobs by priority (a task's rank); these
 * scripts add what open-source BullMQ lacks, each atomic across every process:
 *
 * - `queued:<p>` (sorted set, score: arrival): the principal's tasks not yet started, so that when one of
 *   its tasks comes up while an older one still waits, the older one takes the turn (they swap priorities):
 *   a principal's own tasks start in the order they came, whatever ranks they were given.
 * - `running:<p>` (sorted set, score: when the slot lapses): the principal's runs under way in every worker,
 *   for its cap (`maxRunning`). A worker renews its slots as it renews its locks; one that died stops, and
 *   its slots lapse after the same time as its locks (`lockDurationMs`).
 * - `parked:<p>` (sorted set, score: arrival): its tasks that came up while it was at its cap, and wait in
 *   BullMQ's delayed set until a run of the principal ends and wakes the first of them.
 *
 * A slot is a job's id, so a task taken over from a worker that died (same job) finds its own slot, and the
 * times are Redis's (`TIME`), so workers' clocks do not matter.
 */

const COMMON = `
local function nowMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
-- The running set lapses with its last slot, so that a principal never seen again leaves nothing behind.
local function expireWithLast(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
  if last then redis.call('PEXPIREAT', key, last) end
end
`;

/** KEYS: queued, arrivals counter. ARGV: id. A task already noted keeps its arrival. */
const QUEUED = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[1])
return 1
`;

/**
 * KEYS: running, queued, parked, BullMQ's prioritized and delayed. ARGV: id, limit ('' for none), lease ms, job
 * key prefix. `{ 'full' }`: the principal is at its cap. `{ 'older', id }`: an older task of the principal
 * waits, in the prioritized set or parked in the delayed one (a slot came free: it is being woken, or its wake
 * was lost), and should take this turn. `{ 'run' }`: the task starts, holding a slot when capped. An older
 * entry whose job is gone (ended, cancelled) is dropped on the way.
 */
const START = `${COMMON}
local id, limit, lease, jobPrefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = nowMs()
if limit then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if not redis.call('ZSCORE', KEYS[1], id) and redis.call('ZCARD', KEYS[1]) >= limit then return { 'full' } end
end
local arrival = redis.call('ZSCORE', KEYS[2], id)
if arrival then
  for _, other in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. arrival)) do
    if redis.call('ZSCORE', KEYS[4], other) or redis.call('ZSCORE', KEYS[5], other) then return { 'older', other } end
    if redis.call('EXISTS', jobPrefix .. other) == 0 then redis.call('ZREM', KEYS[2], other) end
  end
end
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
if limit then
  redis.call('ZADD', KEYS[1], now + lease, id)
  expireWithLast(KEYS[1])
end
return { 'run' }
`;

/**
 * KEYS: running, queued, parked. ARGV: id, limit. Parks the task (already in BullMQ's delayed set) by its
 * arrival; one that was never noted (a task handed back or taken over) goes first. 1: a slot came free
 * meanwhile, and the task is not parked: the caller wakes it, since the run that freed the slot found none.
 */
const PARK = `${COMMON}
local id, limit = ARGV[1], tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs())
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZREM', KEYS[3], id)
  return 1
end
redis.call('ZADD', KEYS[3], redis.call('ZSCORE', KEYS[2], id) or 0, id)
return 0
`;

/** KEYS: running, parked. ARGV: id ('' to release none). Frees the task's slot; answers the first parked task, taken off the parked set, or nil. */
const RELEASE = `
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
return redis.call('ZPOPMIN', KEYS[2])[1]
`;

/** KEYS: a running set per slot. ARGV: lease ms, then the slots' ids in the same order. */
const RENEW = `${COMMON}
local lapse = nowMs() + tonumber(ARGV[1])
for index, key in ipairs(KEYS) do
  redis.call('ZADD', key, lapse, ARGV[index + 1])
  expireWithLast(key)
end
return #KEYS
`;

/**
 * KEYS: BullMQ's wait, prioritized and delayed; the principal's queued and parked. ARGV: id, the score above
 * the job's priority. How many waiting jobs start before it; -1 when it is not waiting.
 */
const POSITION = `
local id = ARGV[1]
local waiting = redis.call('LLEN', KEYS[1])
local at = redis.call('LPOS', KEYS[1], id)
if at then return waiting - 1 - at end
local score = redis.call('ZSCORE', KEYS[2], id)
if score then
  -- The principal's tasks take its turns in the order they came: the k-th to come of those waiting gets the k-th best.
  local turn = tonumber(score)
  if redis.call('ZSCORE', KEYS[4], id) then
    local scores, mine = {}, nil
    for _, other in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
      local held = redis.call('ZSCORE', KEYS[2], other)
      if held then
        scores[#scores + 1] = tonumber(held)
        if other == id then mine = #scores end
      end
    end
    table.sort(scores)
    turn = scores[mine] or turn
  end
  return waiting + redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. string.format('%.0f', turn))
end
if redis.call('ZSCORE', KEYS[3], id) then
  return waiting + redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. ARGV[2]) + (redis.call('ZRANK', KEYS[5], id) or 0)
end
return -1
`;

/** The scripts, as ioredis's `scripts` option defines them on the queue's own connection. */
export const PRINCIPAL_TURN_SCRIPTS = {
  klymTurnQueued: { lua: QUEUED, numberOfKeys: 2 },
  klymTurnStart: { lua: START, numberOfKeys: 5 },
  klymTurnPark: { lua: PARK, numberOfKeys: 3 },
  klymTurnRelease: { lua: RELEASE, numberOfKeys: 2 },
  // Any number of keys: the count comes first.
  klymTurnRenew: { lua: RENEW },
  klymTurnPosition: { lua: POSITION, numberOfKeys: 5, readOnly: true },
} as const;

type Scripts = { readonly [name in keyof typeof PRINCIPAL_TURN_SCRIPTS]: (...keysThenArgs: (string | number)[]) => Promise<unknown> };

/** The principal a job was queued for (its data), if it was placed. */
export const principalOf = (data: unknown): string | undefined => {
  const principal = (data as { principal?: unknown } | undefined)?.principal;
  return typeof principal === 'string' ? principal : undefined;
};

/** What a worker may do when one of a principal's tasks comes up. */
export type TurnVerdict = { readonly kind: 'run' } | { readonly kind: 'full' } | { readonly kind: 'older'; readonly id: string };

/** The turns and running slots of principals on one shared queue. Every call may reject when Redis cannot be reached. */
export interface PrincipalTurns {
  /** Notes a task of `principal` just queued, after its job: its arrival, kept if it was noted before. */
  queued(principal: string, id: string): Promise<void>;
  /** Decides a task that came up: see {@link TurnVerdict}. `limit`: the principal's cap on runs at once, if any. */
  start(principal: string, id: string, limit: number | undefined): Promise<TurnVerdict>;
  /** Parks a task moved to BullMQ's delayed set because its principal was at `limit`; true: a slot came free meanwhile, so wake it. */
  park(principal: string, id: string, limit: number): Promise<boolean>;
  /** Frees the slot of run `id` (none when omitted) and takes the principal's first parked task, to wake. */
  release(principal: string, id?: string): Promise<string | undefined>;
  /** Forgets a task that will not wait any more (cancelled): it is no longer among its principal's queued or parked tasks. */
  forget(principal: string, id: string): Promise<void>;
  /** Renews the slots of the runs under way here. */
  renew(held: readonly (readonly [principal: string, id: string])[]): Promise<void>;
  /** How many waiting tasks start before `id` (of `principal`, at `priority`); `undefined` when it is not waiting. */
  position(principal: string | undefined, id: string, priority: number): Promise<number | undefined>;
}

/** The turns of the queue laid out as `layout`, on `client` (made with `scripts: PRINCIPAL_TURN_SCRIPTS`); a slot lapses `leaseMs` after it was last renewed. */
export function createPrincipalTurns(client: Redis, layout: BullmqLayout, leaseMs: number): PrincipalTurns {
  const scripts = client as unknown as Scripts;
  const key = (kind: 'queued' | 'parked' | 'running', principal: string): string => `${layout.jobPrefix}principal:${kind}:${principal}`;
  const arrivals = `${layout.jobPrefix}principal:arrivals`;
  return {
    async queued(principal, id) {
      await scripts.klymTurnQueued(key('queued', principal), arrivals, id);
    },
    async start(principal, id, limit) {
      const reply = (await scripts.klymTurnStart(
        key('running', principal),
        key('queued', principal),
        key('parked', principal),
        layout.prioritized,
        layout.delayed,
        id,
        limit === undefined ? '' : limit,
        leaseMs,
        layout.jobPrefix,
      )) as [string, string?];
      const [kind, other] = reply;
      if (kind === 'older' && other !== undefined) return { kind, id: other };
      return { kind: kind === 'full' ? 'full' : 'run' };
    },
    async park(principal, id, limit) {
      return (await scripts.klymTurnPark(key('running', principal), key('queued', principal), key('parked', principal), id, limit)) === 1;
    },
    async release(principal, id = '') {
      const next = await scripts.klymTurnRelease(key('running', principal), key('parked', principal), id);
      return typeof next === 'string' ? next : undefined;
    },
    async forget(principal, id) {
      await Promise.all([client.zrem(key('queued', principal), id), client.zrem(key('parked', principal), id)]);
    },
    async renew(held) {
      if (held.length === 0) return;
      await scripts.klymTurnRenew(held.length, ...held.map(([principal]) => key('running', principal)), leaseMs, ...held.map(([, id]) => id));
    },
    async position(principal, id, priority) {
      const owner = principal ?? '';
      const at = Number(
        await scripts.klymTurnPosition(
          layout.wait,
          layout.prioritized,
          layout.delayed,
          key('queued', owner),
          key('parked', owner),
          id,
          scoreAbovePriority(priority),
        ),
      );
      return at < 0 ? undefined : at;
    },
  };
}
