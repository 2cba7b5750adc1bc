// Issue #40 with real processes: a task waiting for its caller's answer outlives the process it asked in. On
// SQLite, `klym serve` is killed (SIGKILL) while the task waits and started again on the same file, and the answer
// given to the new process resumes the run. On Redis, a front that runs nothing takes the answer while a worker
// resumes the run — not the worker that ran the question, which was killed meanwhile; and a call waiting for approval
// there is decided on the front and sent once by the worker.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restCall, serveKlym, temporaryDirectory } from './cli-harness.ts';
import { startFakeLlmServer, type FakeReply } from './support/fake-llm-server.ts';
import { startRedisServer } from './support/redis-server.ts';
import { startScaleOut, startTask, statusOf, logOf, type Front } from './support/scale-out.ts';

const OWNER = 'token-of-grynya-0123456789';
const QUESTION = 'Which service: billing or search?';
const ANSWER = 'search-since-the-deploy';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

/**
 * The fake model: a task whose prompt says "Record" writes into the graph (a call that waits for approval), then
 * says the call answered; any other asks its caller until the conversation holds the answer, then says it used it.
 */
function askingModel(requests: string[]): (request: { body: string }) => FakeReply {
  return ({ body }) => {
    if (body.includes('Record why db-3 stopped')) {
      if (body.includes('function_call_output')) return { kind: 'turn', text: 'Recorded it.' };
      const args = {
        node_type: 'Analysis',
        node_data: { id: 'a_db3', full_text: 'db-3 ran out of disk' },
        day_id: 'd_2026_11_28',
        time: '2026-11-28T09:00:00Z',
      };
      return { kind: 'turn', toolCalls: [{ name: 'grynya__add_node', args }] };
    }
    requests.push(body);
    if (body.includes(ANSWER)) return { kind: 'turn', text: `Looked at the errors of ${ANSWER}.` };
    return { kind: 'turn', toolCalls: [{ name: 'klym__ask_caller', args: { question: QUESTION } }] };
  };
}

const logTypes = (entries: readonly { type: string }[]): string[] => entries.map((entry) => entry.type);

describe('a task waiting for its answer, across processes', () => {
  it('on SQLite: klym serve killed while the task waits, started again, takes the answer and the run goes on with it', async () => {
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const grynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const requests: string[] = [];
    const llm = await startFakeLlmServer(askingModel(requests));
    cleanups.push(() => llm.close());
    const config = {
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
      llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
      tasks: { concurrency: 2, store: 'sqlite:state/tasks.db' },
      server: { port: 0, tokens: { grynya: OWNER } },
    };
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));

    const first = await serveKlym(directory.path, cleanups);
    const started = await restCall(first.url, '/api/tasks', OWNER, { prompt: 'Why did errors rise yesterday?' });
    expect(started.status).toBe(202);
    const id = String(started.json.task_id);
    await vi.waitFor(async () => expect((await restCall(first.url, `/api/tasks/${id}`, OWNER)).json).toMatchObject({ status: 'input_required' }), {
      timeout: 15_000,
    });
    first.klym.child.kill('SIGKILL');
    expect((await first.klym.exited()).signal).toBe('SIGKILL');
    expect(requests).toHaveLength(1);

    const second = await serveKlym(directory.path, cleanups);
    // Still waiting, with its question: nothing ran it again at start, and nothing asked the model again.
    expect((await restCall(second.url, `/api/tasks/${id}`, OWNER)).json).toMatchObject({ status: 'input_required', question: QUESTION });
    expect(requests).toHaveLength(1);
    expect(await restCall(second.url, `/api/tasks/${id}/reply`, OWNER, { answer: ANSWER })).toMatchObject({
      status: 200,
      json: { status: expect.stringMatching(/^(pending|running)$/) },
    });
    await vi.waitFor(async () => expect((await restCall(second.url, `/api/tasks/${id}?full_result=true`, OWNER)).json.status).toBe('completed'), {
      timeout: 15_000,
    });
    const done = (await restCall(second.url, `/api/tasks/${id}?full_result=true`, OWNER)).json;
    expect(done).toMatchObject({ result: `Looked at the errors of ${ANSWER}.`, budget: { steps: 2 } });
    // The model's second call read the answer as the ask's result; the asking step was not replayed.
    expect(requests).toHaveLength(2);
    expect(requests[1]).toContain(ANSWER);
    const entries = (await restCall(second.url, `/api/tasks/${id}/logs?limit=500`, OWNER)).json.entries as { type: string }[];
    const types = logTypes(entries);
    expect(types.indexOf('input-required')).toBeLessThan(types.indexOf('input-answered'));
    expect(types.indexOf('input-answered')).toBeLessThan(types.lastIndexOf('task-end'));
    expect(types.filter((type) => type === 'input-required')).toHaveLength(1);

    second.klym.child.kill('SIGTERM');
    expect((await second.klym.exited()).code).toBe(0);
  }, 60_000);

  it('on Redis: a front that runs nothing takes the answer, and another worker than the one that asked resumes the run; an approval decided there is sent once', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    const requests: string[] = [];
    const fleet = await startScaleOut({ redis, replies: askingModel(requests) });
    cleanups.push(() => fleet.close());
    const front: Front = await fleet.front();
    const asker = await fleet.worker();
    const id = await startTask(front, 'Why did errors rise yesterday?');
    await vi.waitFor(async () => expect(await statusOf(front, id)).toMatchObject({ status: 'input_required', question: QUESTION }), { timeout: 15_000 });

    // The worker that ran the question is gone while the task waits; another one is there when the answer comes.
    asker.child.kill('SIGKILL');
    await asker.exited();
    const resumer = await fleet.worker();
    expect(await front.api(`/api/tasks/${id}/reply`, { answer: ANSWER })).toMatchObject({
      status: 200,
      json: { status: expect.stringMatching(/^(pending|running)$/) },
    });
    await vi.waitFor(async () => expect((await statusOf(front, id)).status).toBe('completed'), { timeout: 15_000 });
    expect(await statusOf(front, id)).toMatchObject({ result: `Looked at the errors of ${ANSWER}.`, budget: { steps: 2 } });
    expect(requests).toHaveLength(2);
    expect(requests[1]).toContain(ANSWER);
    const types = logTypes(await logOf(front, id));
    expect(types.indexOf('input-required')).toBeLessThan(types.indexOf('input-answered'));
    expect(types.indexOf('input-answered')).toBeLessThan(types.lastIndexOf('task-end'));
    expect(resumer.child.exitCode).toBeNull();

    // An approval the same way: the call waits until the front takes the decision, then the worker sends it, once.
    const writing = await front.api('/api/tasks', { prompt: 'Record why db-3 stopped', tools: { approval: ['grynya__add_node'] } });
    const writer = String(writing.json.task_id);
    await vi.waitFor(
      async () => expect(await statusOf(front, writer)).toMatchObject({ status: 'input_required', input_kind: 'approval', tool: 'grynya__add_node' }),
      {
        timeout: 15_000,
      },
    );
    expect(fleet.grynya.graph.nodes.has('a_db3')).toBe(false);
    expect(await front.api(`/api/tasks/${writer}/reply`, { approve: true })).toMatchObject({ status: 200 });
    await vi.waitFor(async () => expect(await statusOf(front, writer)).toMatchObject({ status: 'completed', result: 'Recorded it.' }), { timeout: 15_000 });
    expect(fleet.grynya.graph.nodes.get('a_db3')).toMatchObject({ label: 'Analysis' });
    expect(fleet.grynya.stats.calls.add_node).toBe(1);
  }, 60_000);
});
