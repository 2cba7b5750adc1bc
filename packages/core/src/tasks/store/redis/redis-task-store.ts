import type { AgentCheckpoint } from '../../../agent/types.ts';
import { keptBytes, storeLimitError, taskLimitError, type ArtifactLimits } from '../../../artifacts/artifact-limit.ts';
import { ARTIFACT_DEFAULTS, REDIS_DEFAULTS, TASK_DEFAULTS } from '../../../defaults.ts';
import { KlymError } from '../../../errors.ts';
import { tooManyPushTargets } from '../../../webhooks/push-target-list.ts';
import type { BoundedLogOptions } from '../task-log.ts';
import { isTerminal, TASK_STATUSES, type TaskPatch, type TaskRecord, type TaskStatus, type TaskStore } from '../task-types.ts';
import { createCheckpoints } from './checkpoints.ts';
import { createLogStreams } from './log-stream.ts';
import { createRedisOutbox } from './outbox.ts';
import { openRedisConnection } from './redis-connection.ts';
import { redisKeys } from './redis-keys.ts';
import { scriptsOf, type ScriptReply } from './scripts.ts';
import { createdKey, finishedKey, hashPatch, taskFields, taskOf, writingBack } from './task-hash.ts';
import type { ArtifactInfo, StoredArtifact } from '../../../artifacts/artifact-types.ts';
import { positiveInteger } from '../../../internal/positive.ts';

/** Finished tasks one eviction script deletes at most: the bound of how long Redis is busy with one. */
const EVICT_CHUNK = 20;

/**
 * Bytes of artifacts the store keeps in all unless told (2 GiB), lower than on disk: Redis holds them in its
 * memory, and a Redis that runs out of it (`noeviction`) refuses every write, task changes included.
 */
const REDIS_MAX_ARTIFACT_BYTES = 2_147_483_648;

/** Seconds a day's spend is kept after its last change: a daily quota reads only today's. */
const SPEND_KEPT_S = 35 * 86_400;

/** The fields of `principal`'s tokens and USD in a day's spend hash: JSON, so no name can run into another. */
const spendFields = (principal: string): [string, string] => [JSON.stringify([principal, 'tokens']), JSON.stringify([principal, 'usd'])];

const ALL_STATUSES: readonly TaskStatus[] = TASK_STATUSES;

/** Options of {@link createRedisTaskStore}. */
export interface RedisTaskStoreOptions {
  /** redis://[user:password@]host:port/db, or rediss:// for TLS (as ioredis takes it). */
  readonly url: string;
  /** Prefix of every key. @default 'klym:' */
  readonly prefix?: string;
  /** Bounds of each task's log, as BoundedLog's. @default { maxBytes: 262_144, maxEntryBytes: 4_096 } */
  readonly log?: BoundedLogOptions;
  /** How long the first connection may take before the store refuses to open (STORE_UNAVAILABLE). @default REDIS_DEFAULTS.connectTimeoutMs (10_000) */
  readonly connectTimeoutMs?: number;
  /** How long a call waits for Redis's answer before it rejects (STORE_UNAVAILABLE): the bound while Redis hangs. @default REDIS_DEFAULTS.commandTimeoutMs (5_000) */
  readonly commandTimeoutMs?: number;
  /**
   * Caps on the artifacts kept, across every process on this prefix: per task, and in all (past it, a save
   * first drops the artifacts of the tasks that finished first). Every process on one prefix should set the
   * same. @default { maxBytesPerTask: ARTIFACT_DEFAULTS.maxBytesPerTask (1 GiB), maxBytes: 2 GiB }
   */
  readonly artifacts?: ArtifactLimits;
}

/** A {@link TaskStore} in Redis, shared by every Klym process that uses the same Redis and prefix. */
export interface RedisTaskStore extends TaskStore {
  /** What the server's settings put at risk, one line each (appendonly not yes; maxmemory-policy not noeviction; or that CONFIG GET is not allowed so they could not be checked). Empty when all is well. */
  readonly warnings: readonly string[];
  /** host:port/db, never the password: for messages and /healthz. */
  readonly where: string;
  /**
   * Resolves once Redis holds the checkpoint and every log entry appended before it. Rejects with
   * `STORE_UNAVAILABLE` when Redis is down or did not answer, `TASK_NOT_FOUND` when the task is not kept.
   */
  saveCheckpoint(id: string, checkpoint: AgentCheckpoint): Promise<void>;
}

/**
 * A {@link TaskStore} in Redis: task records, bounded logs (the same byte bound as the in-memory store's),
 * results, run checkpoints, artifacts and idempotency keys, shared by any number of Klym processes. Every
 * change that checks before it writes (a status compare-and-set, an idempotent insert, a log's trim, an
 * artifact under its caps, an eviction) is one Lua script, atomic across processes. Durable as far as
 * Redis is: Klym needs `appendonly yes` and `maxmemory-policy noeviction`, and says so in `warnings` when
 * the server is set otherwise.
 *
 * Every call goes through one connection, in order: `appendLog` sends its entry at once without waiting,
 * and whatever is called after it sees it; `saveCheckpoint` resolves once Redis holds the checkpoint and
 * every entry appended before it. While Redis is down every call rejects at once, and the store
 * reconnects by itself; entries appended meanwhile are lost (`appendLog` never throws for Redis's sake).
 *
 * @throws {KlymError} `STORE_UNAVAILABLE`, one line naming `host:port/db` (never the password), when Redis
 * cannot be reached within `connectTimeoutMs`, refuses the URL's credentials or database, or is older than
 * 6.2; `CONFIG_INVALID` when an option is not usable. Once open, a call that fails rejects with
 * `STORE_UNAVAILABLE` saying why, and so does any call after `close()` (except `appendLog`, which then
 * ignores the entry: a run being torn down may still log); an artifact past a cap is `ARTIFACT_LIMIT`.
 *
 * @example
 * ```ts
 * import { createRedisTaskStore } from '@klym/core/redis';
 * await using store = await createRedisTaskStore({ url: 'redis://:secret@redis:6379/0' });
 * for (const warning of store.warnings) console.warn(`${store.where}: ${warning}`);
 * const manager = createTaskManager({ store, ... });
 * ```
 */
export async function createRedisTaskStore(options: RedisTaskStoreOptions): Promise<RedisTaskStore> {
  if (typeof options.url !== 'string')
    throw new KlymError('CONFIG_INVALID', `Expected \`url\` to be a redis:// or rediss:// URL, got a value of type ${typeof options.url}`);
  const prefix = options.prefix ?? 'klym:';
  if (typeof prefix !== 'string') throw invalid('prefix', 'a string', prefix);
  const connectTimeoutMs = positiveInteger('connectTimeoutMs', options.connectTimeoutMs ?? REDIS_DEFAULTS.connectTimeoutMs);
  const commandTimeoutMs = positiveInteger('commandTimeoutMs', options.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs);
  const maxBytes = positiveInteger('log.maxBytes', options.log?.maxBytes ?? TASK_DEFAULTS.logMaxBytes);
  const maxEntryBytes = positiveInteger('log.maxEntryBytes', options.log?.maxEntryBytes ?? TASK_DEFAULTS.logMaxEntryBytes);
  const maxBytesPerTask = positiveInteger('artifacts.maxBytesPerTask', options.artifacts?.maxBytesPerTask ?? ARTIFACT_DEFAULTS.maxBytesPerTask);
  const maxArtifactBytes = positiveInteger('artifacts.maxBytes', options.artifacts?.maxBytes ?? REDIS_MAX_ARTIFACT_BYTES);

  const connection = await openRedisConnection({ url: options.url, connectTimeoutMs, commandTimeoutMs });
  const { client, where } = connection;
  const keys = redisKeys(prefix);
  const scripts = scriptsOf(client);
  const logs = createLogStreams(scripts, keys, { maxBytes, maxEntryBytes });
  const checkpoints = createCheckpoints(scripts, keys);
  const outbox = createRedisOutbox(scripts, prefix);
  let closing: Promise<void> | undefined;

  /** Runs `work` while the store is open, with its failure as the `STORE_UNAVAILABLE` that says what was being done. */
  const use = async <T>(doing: string, work: () => Promise<T>): Promise<T> => {
    if (closing !== undefined) throw closed();
    try {
      return await work();
    } catch (error) {
      throw connection.failure(error, doing);
    }
  };
  const closed = (): KlymError => new KlymError('STORE_UNAVAILABLE', `The Redis task store at ${where} is closed`);

  /** Applies `patch` when the task's status is one of `from` (any, when `from` is undefined, and then never the status). */
  const change = async (id: string, from: readonly TaskStatus[] | undefined, patch: TaskPatch): Promise<TaskRecord | undefined> => {
    const { set, deleted } = hashPatch(patch);
    const status = from === undefined || patch.status === undefined ? '' : patch.status;
    const finished = 'finishedAt' in patch ? finishedKey(patch.finishedAt) || '-' : '';
    const writing = 'writeBack' in patch ? (writingBack(patch) ? '1' : '0') : '';
    const reply = await use(`change task ${id}`, () =>
      scripts.klymChange(keys.task(id), prefix, id, from?.join(' ') ?? '*', status, finished, writing, deleted.length, ...deleted, ...set),
    );
    return taskOf(reply ?? undefined);
  };

  const close = (): Promise<void> => (closing ??= connection.close());

  return {
    where,
    warnings: connection.warnings,
    async insert(task) {
      const key = task.request.idempotencyKey;
      const suffix = key === undefined ? '' : keys.idempotencySuffix(task.principal, key);
      const reply = await use(`insert task ${task.id}`, () =>
        scripts.klymInsert(
          keys.task(task.id),
          keys.sequence,
          suffix === '' ? keys.task(task.id) : keys.idempotency(suffix),
          prefix,
          task.id,
          task.principal,
          task.status,
          createdKey(task.createdAt),
          finishedKey(task.finishedAt),
          writingBack(task) ? '1' : '0',
          suffix,
          ...taskFields(task),
        ),
      );
      const [outcome, fields] = reply as [string, ScriptReply?];
      if (outcome === 'duplicate') throw new KlymError('INVALID_ARGUMENT', `Cannot insert task ${task.id}: a task with that id is already stored`);
      return outcome === 'existing' ? (taskOf(fields) as TaskRecord) : task;
    },
    async get(id) {
      return taskOf(await use(`read task ${id}`, () => client.hgetall(keys.task(id))));
    },
    async findByIdempotencyKey(principal, idempotencyKey) {
      const reply = await use(`look up an idempotency key of ${principal}`, () =>
        scripts.klymLookup(keys.idempotency(keys.idempotencySuffix(principal, idempotencyKey)), prefix),
      );
      return taskOf(reply ?? undefined);
    },
    async transition(id, from, patch) {
      const task = await change(id, from, patch);
      if (task !== undefined && patch.status !== undefined && isTerminal(patch.status)) checkpoints.forget(id);
      return task;
    },
    update(id, patch) {
      // Never the status, even when a caller's object carries one.
      const { status: _status, ...rest } = patch as TaskPatch;
      return change(id, undefined, rest);
    },
    async addPushTarget(id, target, max) {
      const reply = await use(`add a push target to task ${id}`, () => scripts.klymPushTarget(keys.task(id), target.id, JSON.stringify(target), max));
      const [outcome, answer] = (reply ?? []) as [string?, ScriptReply?];
      if (outcome === 'full') throw tooManyPushTargets(id, Number(answer));
      return taskOf(answer);
    },
    async removePushTarget(id, targetId) {
      const reply = await use(`remove a push target of task ${id}`, () => scripts.klymPushTarget(keys.task(id), targetId));
      return taskOf(((reply ?? []) as [string?, ScriptReply?])[1]);
    },
    async list(filter = {}, page = {}) {
      const limit = positiveInteger('limit', page.limit ?? TASK_DEFAULTS.listPageSize, 'INVALID_ARGUMENT');
      const cursor = page.cursor === undefined ? '' : decodeCursor(page.cursor);
      const reply = (await use('list tasks', () => scripts.klymList(keys.index(filter), prefix, cursor, limit + 1))) as ScriptReply[];
      const [total, ...rest] = reply;
      const found = pairsOf(rest);
      const tasks = found
        .slice(0, limit)
        .map(([, fields]) => taskOf(fields))
        .filter((task) => task !== undefined);
      const last = found.length > limit ? found[limit - 1] : undefined;
      return { tasks, total: Number(total), ...(last === undefined ? {} : { nextCursor: encodeCursor(last[0]) }) };
    },
    async counts() {
      const sizes = (await use('count tasks', () => scripts.klymCounts(...ALL_STATUSES.map((status) => keys.index({ status }))))) as number[];
      return Object.fromEntries(ALL_STATUSES.map((status, index) => [status, Number(sizes[index] ?? 0)])) as Record<TaskStatus, number>;
    },
    async unfinished() {
      const indexes = [keys.index({ status: 'pending' }), keys.index({ status: 'running' }), `${prefix}write-back-pending`];
      const reply = (await use('read the unfinished tasks', () => scripts.klymUnfinished(...indexes, prefix))) as ScriptReply[];
      // Members sort as text by creation, then insertion: oldest first.
      return pairsOf(reply)
        .toSorted(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([, fields]) => taskOf(fields))
        .filter((task) => task !== undefined);
    },
    async evict(before) {
      const evicted: TaskRecord[] = [];
      for (;;) {
        const chunk = tasksOf(await use('evict finished tasks', () => scripts.klymEvict(`${prefix}finished`, prefix, before.getTime(), EVICT_CHUNK)));
        for (const task of chunk) checkpoints.forget(task.id);
        evicted.push(...chunk);
        if (chunk.length < EVICT_CHUNK) return evicted;
      }
    },
    appendLog(id, type, data) {
      if (closing !== undefined) return;
      // Fire and forget: while Redis is down the entry is lost, and the next call that needs Redis says so.
      logs.append(id, type, data).catch(() => {});
    },
    readLog(id, after, limit) {
      return use(`read the log of task ${id}`, () => logs.read(id, after, limit));
    },
    tailLog(id, count) {
      return use(`read the log of task ${id}`, () => logs.tail(id, count));
    },
    saveCheckpoint(id, checkpoint) {
      return use(`save a checkpoint of task ${id}`, () => checkpoints.save(id, checkpoint));
    },
    loadCheckpoint(id) {
      return use(`read the checkpoint of task ${id}`, () => checkpoints.load(id));
    },
    async saveArtifact(id, artifact) {
      // The original has a field of its own: `:info` is what a list reads.
      const { text, original, ...info } = artifact;
      const bytes = keptBytes(artifact);
      const reply = (await use(`keep artifact ${artifact.id} of task ${id}`, () =>
        scripts.klymSaveArtifact(
          keys.task(id),
          keys.artifacts(id),
          keys.artifactBytes,
          keys.finishedArtifacts,
          prefix,
          id,
          artifact.id,
          JSON.stringify(info),
          text,
          original === undefined ? '0' : '1',
          original ?? '',
          bytes,
          maxBytesPerTask,
          maxArtifactBytes,
        ),
      )) as [string, number?, number?];
      const [outcome, used = 0, evictable = 0] = reply;
      if (outcome === 'task') throw taskLimitError(artifact, maxBytesPerTask, Number(used));
      if (outcome === 'store') throw storeLimitError(artifact, maxArtifactBytes, Number(used), Number(evictable));
    },
    async loadArtifact(id, artifactId) {
      const [info, text, original] = await use(`read artifact ${artifactId} of task ${id}`, () =>
        client.hmget(keys.artifacts(id), `${artifactId}:info`, `${artifactId}:text`, `${artifactId}:original`),
      );
      if (info === null || info === undefined || text === null || text === undefined) return undefined;
      const stored: StoredArtifact = { ...(JSON.parse(info) as ArtifactInfo), text, ...(original === null || original === undefined ? {} : { original }) };
      return stored;
    },
    async loadArtifactRange(id, artifactId, start, end) {
      // The Buffer variant ioredis defines beside each script: a range may cut a character, which a string reply would mangle.
      const load = (client as unknown as { klymLoadArtifactRangeBuffer: (...args: (string | number)[]) => Promise<Buffer | null> }).klymLoadArtifactRangeBuffer;
      const part = await use(`read artifact ${artifactId} of task ${id}`, () =>
        load.call(client, keys.artifacts(id), artifactId, Math.max(0, Math.floor(start)), Math.max(0, Math.floor(end))),
      );
      return part === null ? undefined : new Uint8Array(part.buffer, part.byteOffset, part.byteLength);
    },
    async listArtifacts(id) {
      // Only the `:info` fields: an artifact's text is never read to list it.
      const fields = await use(`list the artifacts of task ${id}`, () => client.hkeys(keys.artifacts(id)));
      const names = fields.filter((field) => field.endsWith(':info'));
      if (names.length === 0) return [];
      const infos = await use(`list the artifacts of task ${id}`, () => client.hmget(keys.artifacts(id), ...names));
      return infos.flatMap((info) => (info === null ? [] : [JSON.parse(info) as ArtifactInfo])).toSorted((a, b) => a.createdAt.localeCompare(b.createdAt));
    },
    async artifactBytes() {
      return Number((await use('count the artifacts kept', () => client.get(keys.artifactBytes))) ?? 0);
    },
    async addSpend(principal, day, spend) {
      const [tokens, usd] = spendFields(principal);
      const replies = await use('count what a principal spent', () =>
        client
          .multi()
          .hincrby(keys.spend(day), tokens, Math.round(spend.tokens))
          .hincrbyfloat(keys.spend(day), usd, spend.usd)
          .expire(keys.spend(day), SPEND_KEPT_S)
          .exec(),
      );
      // MULTI answers each command's error in place: one that failed is the call's failure.
      const failure = replies?.find(([error]) => error !== null)?.[0];
      if (replies === null || failure) throw connection.failure(failure ?? new Error('the transaction was discarded'), 'count what a principal spent');
      return { tokens: Number(replies[0]?.[1]), usd: Number(replies[1]?.[1]) };
    },
    async spendOf(principal, day) {
      const [tokens, usd] = await use('read what a principal spent', () => client.hmget(keys.spend(day), ...spendFields(principal)));
      return { tokens: Number(tokens ?? 0), usd: Number(usd ?? 0) };
    },
    addWebhookMessages(messages) {
      return use('store webhook messages', () => outbox.addWebhookMessages(messages));
    },
    claimWebhookMessages(now, leaseMs, limit) {
      return use('claim webhook messages', () => outbox.claimWebhookMessages(now, leaseMs, limit));
    },
    settleWebhookMessage(claim, settlement) {
      return use(`settle webhook message ${claim.id}`, () => outbox.settleWebhookMessage(claim, settlement));
    },
    dueOfWebhookMessages(ids) {
      return use('read when webhook messages are due', () => outbox.dueOfWebhookMessages(ids));
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** The tasks of a script's list of hashes. */
const tasksOf = (reply: ScriptReply): TaskRecord[] => (Array.isArray(reply) ? reply.map((fields) => taskOf(fields)).filter((task) => task !== undefined) : []);

/** `[member, fields, member, fields, …]` as pairs. */
function pairsOf(flat: readonly ScriptReply[]): [string, ScriptReply][] {
  const result: [string, ScriptReply][] = [];
  for (let index = 0; index + 1 < flat.length; index += 2) result.push([String(flat[index]), flat[index + 1] as ScriptReply]);
  return result;
}

/** A list cursor: the index member of the last task of a page, opaque to callers. */
const encodeCursor = (member: string): string => Buffer.from(member).toString('base64url');

function decodeCursor(cursor: string): string {
  const member = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString() : '';
  if (/^\d{15}:\d{15}:./s.test(member)) return member;
  throw new KlymError('INVALID_ARGUMENT', '`cursor`: not a cursor this list gave; pass the `next_cursor` of the page before, or none');
}

function invalid(name: string, expected: string, value: unknown): KlymError {
  return new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}
