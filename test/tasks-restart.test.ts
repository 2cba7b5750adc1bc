// A real `klym serve` process killed with SIGKILL mid-work, then started again on the same SQLite file.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restCall, serveKlym, temporaryDirectory } from './cli-harness.ts';
import { startFakeLlmServer, type FakeLlmServer, type FakeReply } from './support/fake-llm-server.ts';

const OWNER = 'token-of-grynya-0123456789';
const STRANGER = 'token-of-mallory-0123456789';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

/** The fake model: what it answers depends on the task's prompt and on what the conversation holds. */
function modelReplies(llmCalls: Map<string, number>): (request: { body: string }) => FakeReply {
  return ({ body }) => {
    const task = /prompt-(done|tool|llm|pending|again)/.exec(body)?.[0] ?? 'unknown';
    const call = (llmCalls.get(task) ?? 0) + 1;
    llmCalls.set(task, call);
    switch (task) {
      case 'prompt-tool':
        return body.includes('outcome is unknown')
          ? { kind: 'turn', text: 'The query was interrupted; I will not guess its outcome.' }
          : { kind: 'turn', toolCalls: [{ name: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } }] };
      case 'prompt-llm':
        return call === 1 ? { kind: 'hang' } : { kind: 'turn', text: 'The model answered after the restart.' };
      default:
        return { kind: 'turn', text: `Answer to ${task}.` };
    }
  };
}

const start = async (url: string, body: Record<string, unknown>): Promise<string> => {
  const { status, json } = await restCall(url, '/api/tasks', OWNER, body);
  expect(status).toBe(202);
  return String(json.task_id);
};
const statusOf = async (url: string, id: string): Promise<Record<string, unknown>> => (await restCall(url, `/api/tasks/${id}?full_result=true`, OWNER)).json;
const logTypes = async (url: string, id: string): Promise<{ type: string; fromStep?: number }[]> =>
  (await restCall(url, `/api/tasks/${id}/logs?limit=500`, OWNER)).json.entries as { type: string; fromStep?: number }[];

describe('klym serve killed with SIGKILL, then started again on the same store', () => {
  it('keeps finished tasks, runs pending ones, resumes running ones without replaying the interrupted tool call', async () => {
    const directory = temporaryDirectory();
    cleanups.push(async () => directory[Symbol.dispose]());
    const grynya: FakeGrynya = await createFakeGrynya();
    cleanups.push(() => grynya.close());
    const llmCalls = new Map<string, number>();
    const llm: FakeLlmServer = await startFakeLlmServer(modelReplies(llmCalls));
    cleanups.push(() => llm.close());
    const config = {
      upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
      llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
      tasks: { concurrency: 2, store: 'sqlite:state/tasks.db' },
      server: { port: 0, tokens: { grynya: OWNER, mallory: STRANGER } },
    };
    writeFileSync(path.join(directory.path, 'klym.config.json'), JSON.stringify(config));

    // The first life: one task completes; one is mid-tool-call, one mid-LLM-request; one waits.
    const first = await serveKlym(directory.path, cleanups);
    const done = await start(first.url, { prompt: 'prompt-done' });
    await vi.waitFor(async () => expect((await statusOf(first.url, done)).status).toBe('completed'), { timeout: 10_000 });
    grynya.faults.hang = true;
    const tool = await start(first.url, { prompt: 'prompt-tool' });
    await vi.waitFor(() => expect(grynya.stats.calls.query_graph).toBe(1), { timeout: 10_000 });
    const llmTask = await start(first.url, { prompt: 'prompt-llm' });
    await vi.waitFor(() => expect(llmCalls.get('prompt-llm')).toBe(1), { timeout: 10_000 });
    const pending = await start(first.url, { prompt: 'prompt-pending', idempotency_key: 'pending-once' });
    expect((await statusOf(first.url, pending)).status).toBe('pending');
    expect((await statusOf(first.url, tool)).status).toBe('running');

    first.klym.child.kill('SIGKILL');
    expect((await first.klym.exited()).signal).toBe('SIGKILL');
    grynya.faults.hang = false;

    // The second life, on the same file.
    const second = await serveKlym(directory.path, cleanups);
    for (const id of [done, tool, llmTask, pending]) {
      await vi.waitFor(async () => expect((await statusOf(second.url, id)).status).toBe('completed'), { timeout: 15_000 });
      expect((await restCall(second.url, `/api/tasks/${id}`, STRANGER)).status).toBe(404);
    }

    const kept = await statusOf(second.url, done);
    expect(kept.result).toBe('Answer to prompt-done.');
    expect((await logTypes(second.url, done)).map((entry) => entry.type)).toEqual(expect.arrayContaining(['task-create', 'llm-response', 'task-end']));

    // The interrupted call reached grynya once, and the model was told its outcome is unknown.
    expect(grynya.stats.calls.query_graph).toBe(1);
    expect((await statusOf(second.url, tool)).result).toBe('The query was interrupted; I will not guess its outcome.');
    const toolLog = await logTypes(second.url, tool);
    expect(toolLog.find((entry) => entry.type === 'task-resume')).toMatchObject({ fromStep: 0 });
    expect(toolLog.filter((entry) => entry.type === 'tool-call')).toHaveLength(1);

    expect((await statusOf(second.url, llmTask)).result).toBe('The model answered after the restart.');
    expect(llmCalls.get('prompt-llm')).toBe(2);
    expect((await statusOf(second.url, llmTask)).resumed_from).toEqual([0]);
    expect((await statusOf(second.url, pending)).result).toBe('Answer to prompt-pending.');

    // The same idempotency key, after the restart, answers the task it started before.
    expect(await start(second.url, { prompt: 'prompt-again', idempotency_key: 'pending-once' })).toBe(pending);
    expect(llmCalls.has('prompt-again')).toBe(false);

    second.klym.child.kill('SIGTERM');
    expect((await second.klym.exited()).code).toBe(0);
  }, 60_000);
});
