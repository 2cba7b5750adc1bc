import type { AgentCheckpoint, TaskLogPage, TaskStore } from '@klym/core';
import type { ArtifactLimits } from '@klym/core/artifacts';
import type { BoundedLogOptions, ClaimedWebhookMessage } from '@klym/core/engine';
import { BoundedLog } from '@klym/core/internal';
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkpointOf, finishedTaskRecord, taskRecord, timeless, userMessage, webhookMessage } from './task-fixtures.ts';
import { describeArtifactContract } from './task-store-artifacts-contract.ts';

/** How the contract gets a store of the kind under test. */
export interface TaskStoreContractOptions {
  /** A new, empty store with these log bounds and artifact caps; the contract closes it. */
  readonly open: (options: { readonly log?: BoundedLogOptions; readonly artifacts?: ArtifactLimits }) => Promise<TaskStore>;
}

/** An upstream's log line, as an `upstream-log` entry's data. */
const logLine = (message: string) => ({ upstream: 'u', source: 'stderr' as const, level: 'info' as const, message });

/** Push target `p<index>`, with a token. */
const pushTarget = (index: number) => ({ id: `p${index}`, url: `https://hooks.example.com/${index}`, token: `token-${index}` });

const EMPTY_PAGE: TaskLogPage = { entries: [], nextCursor: 0, lastSeq: 0, dropped: 0, more: false };

/**
 * What every {@link TaskStore} does alike, as one suite run against each kind (memory, SQLite, Redis). It
 * holds only what the stores agree on; where they differ (a checkpoint of a task that is not stored, calls
 * after `close()`, the order of tasks whose creation times run against their insertion), each store's own
 * tests say what it does.
 */
export function describeTaskStoreContract(name: string, options: TaskStoreContractOptions): void {
  const open = (log?: BoundedLogOptions): Promise<TaskStore> => options.open(log === undefined ? {} : { log });
  const openCapped = (artifacts: ArtifactLimits): Promise<TaskStore> => options.open({ artifacts });

  describe(`${name}: the TaskStore contract`, () => {
    it('keeps every field of a task', async () => {
      await using store = await open();
      const done = finishedTaskRecord('t1');
      expect(await store.insert(done)).toEqual(done);
      expect(await store.get('t1')).toEqual(done);
      expect(await store.get('missing')).toBeUndefined();
    });

    it('applies a transition only from the given statuses, and once among 100 concurrent ones', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1'));
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, index) => store.transition('t1', ['pending'], { status: 'running', currentStep: `runner ${index}` })),
      );
      const applied = results.filter((result) => result !== undefined);
      expect(applied).toHaveLength(1);
      expect(await store.get('t1')).toEqual(applied[0]);
      expect(await store.transition('t1', ['pending'], { status: 'cancelled' })).toBeUndefined();
      expect(await store.transition('missing', ['pending'], { status: 'running' })).toBeUndefined();
      expect(await store.transition('t1', [], { status: 'cancelled' })).toBeUndefined();
      const finished = await store.transition('t1', ['pending', 'running'], { status: 'completed', finishedAt: '2026-01-01T00:01:00.000Z' });
      expect(finished).toMatchObject({ id: 't1', status: 'completed', finishedAt: '2026-01-01T00:01:00.000Z', currentStep: applied[0]?.currentStep });
      expect(await store.get('t1')).toEqual(finished);
      expect(await store.counts()).toEqual({ pending: 0, running: 0, input_required: 0, completed: 1, error: 0, cancelled: 0 });
      expect((await store.list({ status: 'completed' })).tasks.map((task) => task.id)).toEqual(['t1']);
      expect((await store.list({ status: 'pending' })).total).toBe(0);
    });

    it('updates any field but the status, whatever the status, and drops a field set to undefined', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1', { status: 'completed', cancelReason: 'x' }));
      const patch = { status: 'running', writeBack: { status: 'pending', nodeId: 'klym_t1', dayId: 'd' }, cancelReason: undefined } as const;
      const updated = await store.update('t1', patch);
      expect(updated).toMatchObject({ status: 'completed', writeBack: { status: 'pending' } });
      expect(updated?.cancelReason).toBeUndefined();
      expect(await store.get('t1')).toEqual(updated);
      expect(await store.counts()).toMatchObject({ completed: 1, running: 0 });
      expect(await store.update('missing', { currentStep: 'x' })).toBeUndefined();
    });

    it('lists newest first in pages with a cursor, filtered, with the total', async () => {
      await using store = await open();
      for (let index = 0; index < 7; index++) {
        await store.insert(taskRecord(`t${index}`, { principal: index % 2 === 0 ? 'alice' : 'bob', createdAt: `2026-01-01T00:00:0${index}.000Z` }));
      }
      // Two tasks created in the same millisecond: the one inserted later is newer.
      await store.insert(taskRecord('t7', { createdAt: '2026-01-01T00:00:06.000Z' }));
      const first = await store.list({}, { limit: 3 });
      expect(first.tasks.map((item) => item.id)).toEqual(['t7', 't6', 't5']);
      expect(first.total).toBe(8);
      const second = await store.list({}, { limit: 3, ...(first.nextCursor === undefined ? {} : { cursor: first.nextCursor }) });
      expect(second.tasks.map((item) => item.id)).toEqual(['t4', 't3', 't2']);
      const third = await store.list({}, { limit: 3, ...(second.nextCursor === undefined ? {} : { cursor: second.nextCursor }) });
      expect(third.tasks.map((item) => item.id)).toEqual(['t1', 't0']);
      expect(third.nextCursor).toBeUndefined();
      // A page that ends exactly at the oldest task has no cursor either.
      expect((await store.list({}, { limit: 8 })).nextCursor).toBeUndefined();

      const alice = await store.list({ principal: 'alice' });
      expect(alice).toEqual({ tasks: expect.any(Array), total: 5 });
      expect(alice.tasks.map((item) => item.id)).toEqual(['t7', 't6', 't4', 't2', 't0']);
      await store.transition('t3', ['pending'], { status: 'running' });
      expect((await store.list({ principal: 'bob', status: 'running' })).tasks.map((item) => item.id)).toEqual(['t3']);
      expect((await store.list({ principal: 'bob', status: 'pending' })).tasks.map((item) => item.id)).toEqual(['t5', 't1']);
      expect((await store.list({ status: 'pending' }, { limit: 1 })).total).toBe(7);
      expect(await store.list({ principal: 'nobody' })).toEqual({ tasks: [], total: 0 });
      await expect(store.list({}, { cursor: 'not-a-cursor' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(store.list({}, { limit: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    });

    it('counts tasks by status, and gives the unfinished ones oldest first', async () => {
      await using store = await open();
      await store.insert(taskRecord('done', { status: 'error', createdAt: '2026-01-01T00:00:00.000Z' }));
      await store.insert(taskRecord('old', { status: 'running', createdAt: '2026-01-01T00:00:01.000Z' }));
      await store.insert(
        taskRecord('writing', {
          status: 'completed',
          createdAt: '2026-01-01T00:00:02.000Z',
          writeBack: { status: 'pending', nodeId: 'klym_writing', dayId: 'd' },
        }),
      );
      await store.insert(taskRecord('new', { createdAt: '2026-01-01T00:00:03.000Z' }));
      await store.insert(taskRecord('written', { status: 'completed', createdAt: '2026-01-01T00:00:04.000Z' }));
      expect(await store.counts()).toEqual({ pending: 1, running: 1, input_required: 0, completed: 2, error: 1, cancelled: 0 });
      // A write-back under way when the process died is unfinished business too.
      expect((await store.unfinished()).map((item) => item.id)).toEqual(['old', 'writing', 'new']);
      await store.update('writing', { writeBack: { status: 'written', nodeId: 'klym_writing', dayId: 'd' } });
      await store.update('written', { writeBack: { status: 'pending', nodeId: 'klym_written', dayId: 'd' } });
      await store.transition('new', ['pending'], { status: 'cancelled' });
      expect((await store.unfinished()).map((item) => item.id)).toEqual(['old', 'written']);
    });

    it('evicts finished tasks older than the cutoff with their logs, checkpoints and idempotency keys', async () => {
      await using store = await open();
      await store.insert(taskRecord('old', { status: 'completed', finishedAt: '2026-01-01T00:00:00.000Z', request: { prompt: 'x', idempotencyKey: 'k' } }));
      await store.insert(taskRecord('recent', { status: 'cancelled', finishedAt: '2026-01-01T02:00:00.000Z' }));
      await store.insert(taskRecord('running', { status: 'running' }));
      await store.insert(taskRecord('ended', { status: 'running' }));
      await store.transition('ended', ['running'], { status: 'error', finishedAt: '2026-01-01T00:30:00.000Z' });
      store.appendLog('old', 'task-start', { model: 'hello' });
      await store.saveCheckpoint('old', checkpointOf([userMessage('hi')]));
      const evicted = await store.evict(new Date('2026-01-01T01:00:00.000Z'));
      expect(evicted.map((item) => item.id).toSorted()).toEqual(['ended', 'old']);
      expect(await store.get('old')).toBeUndefined();
      expect(await store.readLog('old')).toEqual(EMPTY_PAGE);
      expect(await store.loadCheckpoint('old')).toBeUndefined();
      expect(await store.findByIdempotencyKey('alice', 'k')).toBeUndefined();
      expect((await store.list()).tasks.map((item) => item.id)).toEqual(['running', 'recent']);
      expect(await store.counts()).toEqual({ pending: 0, running: 1, input_required: 0, completed: 0, error: 0, cancelled: 1 });
      expect(await store.evict(new Date('2026-01-01T01:00:00.000Z'))).toEqual([]);
      // The key is free again: a new start with it is a new task.
      expect((await store.insert(taskRecord('again', { request: { prompt: 'x', idempotencyKey: 'k' } }))).id).toBe('again');
    });

    describeArtifactContract(open, openCapped);

    it('evicts many finished tasks, and none still running', async () => {
      await using store = await open();
      for (let index = 0; index < 45; index++) await store.insert(taskRecord(`done-${index}`, { status: 'completed', finishedAt: '2026-01-01T00:00:00.000Z' }));
      await store.insert(taskRecord('running', { status: 'running', finishedAt: '2026-01-01T00:00:00.000Z' }));
      expect(await store.evict(new Date('2026-01-02T00:00:00.000Z'))).toHaveLength(45);
      expect((await store.list()).tasks.map((item) => item.id)).toEqual(['running']);
    });

    it('answers a repeated idempotency key of one principal with the task it started', async () => {
      await using store = await open();
      const first = await store.insert(taskRecord('t1', { request: { prompt: 'a', idempotencyKey: 'k1' } }));
      const [again, other] = await Promise.all([
        store.insert(taskRecord('t2', { request: { prompt: 'b', idempotencyKey: 'k1' } })),
        store.insert(taskRecord('t3', { principal: 'bob', request: { prompt: 'c', idempotencyKey: 'k1' } })),
      ]);
      expect(again).toEqual(first);
      expect(other.id).toBe('t3');
      expect(await store.get('t2')).toBeUndefined();
      expect((await store.list()).total).toBe(2);
      expect((await store.findByIdempotencyKey('alice', 'k1'))?.id).toBe('t1');
      expect((await store.findByIdempotencyKey('bob', 'k1'))?.id).toBe('t3');
      expect(await store.findByIdempotencyKey('alice', 'k2')).toBeUndefined();
      const racing = await Promise.all(
        Array.from({ length: 10 }, (_, index) => store.insert(taskRecord(`r${index}`, { request: { prompt: 'r', idempotencyKey: 'k-race' } }))),
      );
      expect(new Set(racing.map((task) => task.id)).size).toBe(1);
      expect((await store.list()).total).toBe(3);
    });

    it('refuses a second task with an id already stored', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1'));
      await expect(store.insert(taskRecord('t1', { principal: 'bob' }))).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((await store.get('t1'))?.principal).toBe('alice');
    });

    it('bounds a log exactly as BoundedLog does, page for page', async () => {
      const entry = fc.oneof(
        fc
          .record({ text: fc.string({ unit: 'binary', maxLength: 12 }), times: fc.nat(60) })
          .map(({ text, times }) => ({ type: 'task-start' as const, data: { model: text.repeat(times) } })),
        fc
          .record({ nested: fc.record({ list: fc.array(fc.string({ maxLength: 80 }), { maxLength: 25 }) }), n: fc.integer() })
          .map((args) => ({ type: 'tool-call' as const, data: { step: args.n, toolCallId: 'c1', toolName: 't', args } })),
      );
      const operation = fc.oneof(
        { weight: 6, arbitrary: fc.record({ append: entry }) },
        { weight: 2, arbitrary: fc.record({ read: fc.tuple(fc.integer({ min: 0, max: 80 }), fc.integer({ min: 0, max: 30 })) }) },
        { weight: 1, arbitrary: fc.record({ tail: fc.integer({ min: 0, max: 30 }) }) },
        { weight: 1, arbitrary: fc.constant({ tick: true }) },
      );
      const bounds = fc.record({ maxBytes: fc.integer({ min: 150, max: 3_000 }), maxEntryBytes: fc.integer({ min: 40, max: 600 }) });
      await fc.assert(
        fc.asyncProperty(bounds, fc.array(operation, { maxLength: 80 }), async (log, operations) => {
          await using store = await open(log);
          const reference = new BoundedLog(log);
          await store.insert(taskRecord('t1'));
          const pages: { store: TaskLogPage; bounded: TaskLogPage }[] = [];
          for (const op of operations) {
            if ('append' in op) {
              store.appendLog('t1', op.append.type, op.append.data);
              reference.append(op.append.type, op.append.data);
            } else if ('read' in op) {
              pages.push({ store: await store.readLog('t1', ...op.read), bounded: reference.read(...op.read) });
            } else if ('tail' in op) {
              pages.push({ store: await store.tailLog('t1', op.tail), bounded: reference.tail(op.tail) });
            } else {
              await new Promise((resolve) => setImmediate(resolve));
            }
          }
          pages.push({ store: await store.readLog('t1', 0, 1_000), bounded: reference.read(0, 1_000) });
          expect(pages.map((page) => timeless(page.store))).toEqual(pages.map((page) => timeless(page.bounded)));
        }),
        { numRuns: 25 },
      );
    });

    it('keeps a flooded log within its bound, and says what a page skipped', async () => {
      await using store = await open({ maxBytes: 2_000 });
      await store.insert(taskRecord('t1'));
      for (let line = 1; line <= 2_000; line++) store.appendLog('t1', 'upstream-log', logLine(`line ${line} ${'x'.repeat(50)}`));
      const page = await store.readLog('t1', 0, 5);
      const first = page.entries[0]?.seq ?? 0;
      expect(first).toBeGreaterThan(1_950);
      expect(page).toMatchObject({ lastSeq: 2_000, dropped: first - 1, droppedBefore: { fromSeq: 1, toSeq: first - 1 }, more: true });
      const kept = await store.readLog('t1', 0, 1_000);
      const bytes = kept.entries.reduce((sum, entry) => sum + Buffer.byteLength(JSON.stringify(entry)), 0);
      expect(bytes).toBeLessThanOrEqual(2_000);
      expect((await store.tailLog('t1', 1)).entries[0]?.data).toEqual(logLine(`line 2000 ${'x'.repeat(50)}`));
    });

    it('shows every append to the next read, and keeps no log for a task it does not keep', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1'));
      store.appendLog('t1', 'step-start', { step: 1 });
      store.appendLog('t1', 'task-start', { model: 'b' });
      expect((await store.readLog('t1')).entries.map((entry) => entry.type)).toEqual(['step-start', 'task-start']);
      store.appendLog('t1', 'step-start', { step: 3 });
      expect((await store.get('t1'))?.id).toBe('t1');
      expect((await store.tailLog('t1', 1)).entries).toMatchObject([{ seq: 3, type: 'step-start', data: { step: 3 } }]);
      expect(await store.readLog('t1', 1, 1)).toMatchObject({ entries: [{ seq: 2 }], nextCursor: 2, lastSeq: 3, dropped: 0, more: true });
      expect(await store.readLog('t1', 3)).toMatchObject({ entries: [], nextCursor: 3, lastSeq: 3, more: false });
      store.appendLog('missing', 'step-start', { step: 1 });
      expect(await store.readLog('missing')).toEqual(EMPTY_PAGE);
      expect(await store.tailLog('missing', 3)).toEqual(EMPTY_PAGE);
    });

    it('round-trips a checkpoint, with the calls of the step under way', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1', { status: 'running' }));
      expect(await store.loadCheckpoint('t1')).toBeUndefined();
      const saved: AgentCheckpoint = {
        ...checkpointOf(
          [userMessage('hi'), { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'grynya__query', input: { q: 1 } }] }],
          1,
        ),
        current: { step: 2, text: 'thinking', calls: [{ toolCallId: 'c2', toolName: 'grynya__query', input: { q: 2 } }] },
      };
      await store.saveCheckpoint('t1', saved);
      expect(await store.loadCheckpoint('t1')).toEqual(saved);
    });

    it('keeps the latest checkpoint as the run grows, shrinks and changes an earlier message', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1', { status: 'running' }));
      const [m1, m2, m3] = [userMessage('m1'), userMessage('m2'), userMessage('m3')];
      await store.saveCheckpoint('t1', checkpointOf([m1, m2]));
      await store.saveCheckpoint('t1', checkpointOf([m1, m2, m3]));
      await store.saveCheckpoint('t1', checkpointOf([m1, m2, m3], 4));
      expect(await store.loadCheckpoint('t1')).toEqual(checkpointOf([m1, m2, m3], 4));
      await store.saveCheckpoint('t1', checkpointOf([m1]));
      expect((await store.loadCheckpoint('t1'))?.messages).toEqual([m1]);
      await store.saveCheckpoint('t1', checkpointOf([m1, m2, m3]));
      // An earlier message replaced (a resumed run drops an interrupted call).
      await store.saveCheckpoint('t1', checkpointOf([m1, userMessage('m2 again'), m3]));
      expect((await store.loadCheckpoint('t1'))?.messages).toEqual([m1, userMessage('m2 again'), m3]);
      // A run that continues what it loaded.
      const loaded = await store.loadCheckpoint('t1');
      await store.saveCheckpoint('t1', checkpointOf([...(loaded?.messages ?? []), userMessage('m4')]));
      expect((await store.loadCheckpoint('t1'))?.messages).toEqual([m1, userMessage('m2 again'), m3, userMessage('m4')]);
    });

    it('keeps webhook messages in an outbox: each id once, claimed by one claim at a time, settled only under its lease', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1', { status: 'completed', finishedAt: '2026-01-01T00:00:00.000Z' }));
      await store.addWebhookMessages([webhookMessage('m1', { nextAttemptAt: 1_000 }), webhookMessage('m2', { nextAttemptAt: 5_000 })]);
      // Stored once: the same id again (another process storing the same event) changes nothing.
      await store.addWebhookMessages([webhookMessage('m1', { payload: '{"changed":true}', nextAttemptAt: 0 })]);
      // A message outlives its task's eviction: the receiver is still owed the event.
      expect(await store.evict(new Date('2026-02-01T00:00:00.000Z'))).toHaveLength(1);

      const claims = (await Promise.all(Array.from({ length: 100 }, () => store.claimWebhookMessages(2_000, 10_000, 10)))).flat();
      expect(claims).toHaveLength(1);
      const [first] = claims as [ClaimedWebhookMessage];
      expect(first).toEqual({ ...webhookMessage('m1', { nextAttemptAt: 1_000 }), lease: expect.any(String), leaseUntil: 12_000 });
      // Leased, it is not due again before its lease ends.
      const [second] = (await store.claimWebhookMessages(6_000, 10_000, 10)) as [ClaimedWebhookMessage];
      expect(second).toMatchObject({ id: 'm2', attempts: 0 });
      expect(await store.claimWebhookMessages(6_000, 10_000, 10)).toEqual([]);
      expect(await store.settleWebhookMessage(second, { attempts: 1, nextAttemptAt: 20_000 })).toBe(true);

      // Its claim never settled (its process died): due again at its lease's end, under a new lease.
      const [again] = (await store.claimWebhookMessages(12_000, 10_000, 10)) as [ClaimedWebhookMessage];
      expect(again).toMatchObject({ id: 'm1', attempts: 0 });
      expect(again.lease).not.toBe(first.lease);
      expect(await store.settleWebhookMessage(first, 'done')).toBe(false);
      expect(await store.settleWebhookMessage(again, 'done')).toBe(true);
      expect(await store.settleWebhookMessage(again, 'done')).toBe(false);

      await store.addWebhookMessages([webhookMessage('m3', { nextAttemptAt: 25_000 }), webhookMessage('m4', { nextAttemptAt: 21_000 })]);
      expect(await store.claimWebhookMessages(30_000, 10_000, 0)).toEqual([]);
      const due = await store.claimWebhookMessages(30_000, 10_000, 2);
      expect(due.map((message) => [message.id, message.attempts, message.nextAttemptAt])).toEqual([
        ['m2', 1, 20_000],
        ['m4', 0, 21_000],
      ]);
      expect((await store.claimWebhookMessages(30_000, 10_000, 10)).map((message) => message.id)).toEqual(['m3']);
    });

    it("counts each principal's spend per day: concurrent adds all kept, other principals and days apart", async () => {
      const store = await open();
      expect(await store.spendOf('alice', '2026-11-27')).toEqual({ tokens: 0, usd: 0 });
      const adds = Array.from({ length: 20 }, (_, index) => store.addSpend('alice', '2026-11-27', { tokens: 100 + index, usd: 0.25 }));
      const totals = await Promise.all(adds);
      // Every add answered a distinct running total, the last of them the sum.
      expect(new Set(totals.map((total) => total.tokens)).size).toBe(20);
      expect(await store.spendOf('alice', '2026-11-27')).toEqual({ tokens: 2_190, usd: 5 });
      await store.addSpend('alice:x', '2026-11-27', { tokens: 7, usd: 0 });
      await store.addSpend('alice', '2026-11-28', { tokens: 1, usd: 0.5 });
      expect(await store.spendOf('alice', '2026-11-27')).toEqual({ tokens: 2_190, usd: 5 });
      expect(await store.spendOf('alice:x', '2026-11-27')).toEqual({ tokens: 7, usd: 0 });
      expect(await store.spendOf('alice', '2026-11-28')).toEqual({ tokens: 1, usd: 0.5 });
      expect(await store.spendOf('bob', '2026-11-27')).toEqual({ tokens: 0, usd: 0 });
    });

    it('changes push targets in one step each: 20 concurrent adds all kept, the cap held, 10 concurrent removes all applied', async () => {
      await using store = await open();
      await store.insert(taskRecord('t1', { push: [{ id: 'first', url: 'https://hooks.example.com/first' }] }));
      const added = await Promise.all(Array.from({ length: 20 }, (_, index) => store.addPushTarget('t1', pushTarget(index), 50)));
      expect(added.every((task) => task?.push?.some((kept) => kept.id === 'first'))).toBe(true);
      const ids = (await store.get('t1'))?.push?.map((kept) => kept.id);
      expect(ids?.[0]).toBe('first');
      expect(new Set(ids)).toEqual(new Set(['first', ...Array.from({ length: 20 }, (_, index) => `p${index}`)]));
      expect((await store.get('t1'))?.push?.find((kept) => kept.id === 'p7')).toEqual(pushTarget(7));

      // Replacing a target moves it last; the task's other fields are untouched.
      const replaced = await store.addPushTarget('t1', { id: 'first', url: 'https://hooks.example.com/again' }, 50);
      expect(replaced?.push?.at(-1)).toEqual({ id: 'first', url: 'https://hooks.example.com/again' });
      expect(replaced).toMatchObject({ id: 't1', status: 'pending', principal: 'alice' });

      const removed = await Promise.all(Array.from({ length: 10 }, (_, index) => store.removePushTarget('t1', `p${index * 2}`)));
      expect(removed.every((task) => task !== undefined)).toBe(true);
      const left = (await store.get('t1'))?.push?.map((kept) => kept.id);
      expect(new Set(left)).toEqual(new Set(['first', ...Array.from({ length: 10 }, (_, index) => `p${index * 2 + 1}`)]));
      expect((await store.removePushTarget('t1', 'p0'))?.push).toHaveLength(11);

      // Of 20 concurrent adds to a task that may have 3, exactly 3 are kept; the others are refused, saying so.
      await store.insert(taskRecord('t2'));
      const capped = await Promise.allSettled(Array.from({ length: 20 }, (_, index) => store.addPushTarget('t2', pushTarget(index), 3)));
      expect(capped.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(3);
      for (const outcome of capped.filter((each) => each.status === 'rejected')) {
        expect(outcome.reason).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'Task t2 has 3 push configs, the most a task may have: delete one first' });
      }
      expect((await store.get('t2'))?.push).toHaveLength(3);

      // Removing the last leaves no `push`; a task not kept is `undefined`, and nothing is stored for it.
      for (const kept of (await store.get('t2'))?.push ?? []) await store.removePushTarget('t2', kept.id);
      expect((await store.get('t2'))?.push).toBeUndefined();
      expect(await store.addPushTarget('missing', pushTarget(0), 3)).toBeUndefined();
      expect(await store.removePushTarget('missing', 'p0')).toBeUndefined();
      expect(await store.get('missing')).toBeUndefined();
    });

    it('closes idempotently', async () => {
      const store = await open();
      await store.insert(taskRecord('t1'));
      const closing = store.close();
      await expect(Promise.all([closing, store.close(), store[Symbol.asyncDispose]()])).resolves.toHaveLength(3);
    });
  });
}
