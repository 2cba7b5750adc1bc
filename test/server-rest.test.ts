import { KlymError, createMemoryTaskStore, createSessionPool } from '@klym/core';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it } from 'vitest';
import { createKlymApp, type KlymApp } from '../apps/server/src/server/index.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const TOKEN = 'rest-token-0123456789abcdef';
const UPSTREAM_SECRET = 'upstream-secret-abcdef0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

async function klymOverGrynya(): Promise<{ klym: KlymApp; grynya: FakeGrynya }> {
  const grynya = await createFakeGrynya();
  const klym = await createKlymApp({
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', headers: { 'X-Api-Key': UPSTREAM_SECRET } } },
    auth: { tokens: { grynya: TOKEN } },
    tasks: { shutdownGraceMs: 0 },
    log: () => {},
  });
  cleanups.push(
    () => grynya.close(),
    () => klym.close(),
  );
  await klym.service.pool.warmedUp();
  return { klym, grynya };
}

const json = async (response: Response): Promise<Record<string, unknown>> => (await response.json()) as Record<string, unknown>;

describe('the REST API, through app.request()', () => {
  it('answers 429 with TASK_QUEUE_FULL and a Retry-After when the queue of waiting tasks is full', async () => {
    const grynya = await createFakeGrynya();
    grynya.faults.hang = true;
    const klym = await createKlymApp({
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
      tasks: { maxConcurrent: 1, maxQueued: 1, shutdownGraceMs: 0 },
      log: () => {},
    });
    cleanups.push(
      () => grynya.close(),
      () => klym.close(),
    );
    const start = () =>
      klym.app.request('/api/tasks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Self-check' }) });
    expect((await start()).status).toBe(202);
    await expect.poll(() => grynya.stats.toolCalls, { timeout: 10_000 }).toBe(1);
    expect((await start()).status).toBe(202);
    const refused = await start();
    expect(refused.status).toBe(429);
    // No run has ended to tell how long one takes: the fixed wait, TASK_DEFAULTS.retryAfterMs.
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(await json(refused)).toMatchObject({ error: { code: 'TASK_QUEUE_FULL', message: expect.stringContaining('tasks.maxQueued 1') } });
  });

  it('shows first, in the result of a task a budget stopped, that its answer is partial', async () => {
    const { klym } = await klymOverGrynya();
    const started = await klym.app.request('/api/tasks', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Self-check', budget: { max_steps: 1 } }),
    });
    const { task_id: taskId } = await json(started);
    // The self-check calls the probes in its first step and reports in its second: one step is not enough.
    await expect
      .poll(async () => (await json(await klym.app.request(`/api/tasks/${String(taskId)}`, { headers: auth }))).status, { timeout: 10_000 })
      .toBe('completed');
    const task = await json(await klym.app.request(`/api/tasks/${String(taskId)}?full_result=true`, { headers: auth }));
    expect(task).toMatchObject({ finish_reason: 'budget:steps' });
    expect(String(task.result).split('\n')[0]).toBe('Stopped by the budget (max_steps 1: 1 step taken) before the work was done: this answer is partial.');
  });

  it('starts a task, reads it, pages its log, lists and cancels, with the same JSON as the tools', async () => {
    const { klym, grynya } = await klymOverGrynya();
    const started = await klym.app.request('/api/tasks', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Self-check', record_result: true }),
    });
    expect(started.status).toBe(202);
    const { task_id: taskId } = (await json(started)) as { task_id: string };

    await expect
      .poll(async () => (await json(await klym.app.request(`/api/tasks/${taskId}`, { headers: auth }))).status, { timeout: 10_000 })
      .toBe('completed');
    await expect.poll(() => grynya.graph.nodes.has(`klym_${taskId}`), { timeout: 10_000 }).toBe(true);
    const full = await json(await klym.app.request(`/api/tasks/${taskId}?full_result=true`, { headers: auth }));
    expect(full).toMatchObject({ task_id: taskId, status: 'completed', result: expect.stringMatching(/^Бачу базу та інструменти, полет нормальний/m) });
    expect(full.result_truncated).toBeUndefined();

    const first = await json(await klym.app.request(`/api/tasks/${taskId}/logs?after=0&limit=2`, { headers: auth }));
    expect(first).toMatchObject({ task_id: taskId, entries: [{ seq: 1, type: 'task-create' }, { seq: 2 }], next_cursor: 2, more: true });
    const rest = await json(await klym.app.request(`/api/tasks/${taskId}/logs?after=2&limit=500`, { headers: auth }));
    expect((rest.entries as { seq: number; type: string }[])[0]?.seq).toBe(3);
    expect((rest.entries as { type: string }[]).map((entry) => entry.type)).toContain('task-end');

    expect(await json(await klym.app.request('/api/tasks?status=completed', { headers: auth }))).toMatchObject({ total: 1, tasks: [{ task_id: taskId }] });
    expect(await json(await klym.app.request('/api/tasks?status=running', { headers: auth }))).toMatchObject({ total: 0 });
    const cancel = await json(await klym.app.request(`/api/tasks/${taskId}/cancel`, { method: 'POST', headers: auth }));
    expect(cancel).toMatchObject({ cancelled: false, status: 'completed' });
  });

  it('answers a start with an idempotency key used before with the same task, and pages the list with a cursor', async () => {
    const { klym } = await klymOverGrynya();
    const start = (body: Record<string, unknown>) =>
      klym.app.request('/api/tasks', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const first = (await json(await start({ prompt: 'Self-check', idempotency_key: 'retry-me' }))) as { task_id: string };
    const again = await start({ prompt: 'Self-check', idempotency_key: 'retry-me' });
    expect(again.status).toBe(202);
    expect(await json(again)).toMatchObject({ task_id: first.task_id });
    const second = (await json(await start({ prompt: 'Self-check' }))) as { task_id: string };

    const newest = await json(await klym.app.request('/api/tasks?limit=1', { headers: auth }));
    expect(newest).toMatchObject({ total: 2, tasks: [{ task_id: second.task_id }], next_cursor: expect.any(String) });
    const older = await json(await klym.app.request(`/api/tasks?limit=1&cursor=${encodeURIComponent(String(newest.next_cursor))}`, { headers: auth }));
    expect(older).toMatchObject({ total: 2, tasks: [{ task_id: first.task_id }] });
    expect(older.next_cursor).toBeUndefined();
    expect((await klym.app.request('/api/tasks?cursor=nonsense', { headers: auth })).status).toBe(400);
  });

  it('answers bad input with 400 naming the field, and an unknown task with 404', async () => {
    const { klym } = await klymOverGrynya();
    const post = (body: string) => klym.app.request('/api/tasks', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body });
    expect(await json(await post('{"prompt": '))).toMatchObject({ error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/body/) } });
    const missing = await post('{}');
    expect(missing.status).toBe(400);
    expect(await json(missing)).toMatchObject({ error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`prompt`/) } });
    expect(await json(await post('{"prompt": "x", "surprise": 1}'))).toMatchObject({ error: { message: expect.stringMatching(/surprise/) } });
    expect((await klym.app.request('/api/tasks?status=weird', { headers: auth })).status).toBe(400);
    expect((await klym.app.request('/api/tasks/nope/logs?after=-1', { headers: auth })).status).toBe(400);
    const unknown = await klym.app.request('/api/tasks/nope', { headers: auth });
    expect(unknown.status).toBe(404);
    expect(await json(unknown)).toMatchObject({ error: { code: 'TASK_NOT_FOUND' } });
  });

  it('answers 503 with STORE_UNAVAILABLE when the task store fails', async () => {
    const pool = await createSessionPool({ upstreams: {} });
    const store = createMemoryTaskStore();
    const broken = {
      ...store,
      list: async () => Promise.reject(new KlymError('STORE_UNAVAILABLE', 'The task store /var/lib/klym/tasks.db failed: disk I/O error')),
    };
    const klym = await createKlymApp({ pool, tasks: { store: broken, shutdownGraceMs: 0 }, log: () => {} });
    cleanups.push(
      () => pool.close(),
      () => klym.close(),
    );
    const response = await klym.app.request('/api/tasks');
    expect(response.status).toBe(503);
    expect(await json(response)).toEqual({ error: { code: 'STORE_UNAVAILABLE', message: 'The task store /var/lib/klym/tasks.db failed: disk I/O error' } });
  });

  it('reports pool and tasks on /healthz without secrets', async () => {
    const { klym } = await klymOverGrynya();
    const response = await klym.app.request('/healthz');
    expect(response.status).toBe(200);
    const body = await response.text();
    expect(JSON.parse(body)).toMatchObject({
      status: 'ok',
      upstreams: { grynya: { state: 'ready', transport: 'sse' } },
      tasks: { running: 0, input_required: 0, completed: 0 },
    });
    expect(body).not.toContain(TOKEN);
    expect(body).not.toContain(UPSTREAM_SECRET);
    expect(body).not.toMatch(/127\.0\.0\.1:\d+/);
  });
});
