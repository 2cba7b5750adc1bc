// Issue #40: a task that asks its caller, as Grynya meets it over HTTP: the official MCP client sees the
// question in check_task_status and answers with reply_to_agent_task; over REST, POST /api/tasks/:id/reply.
import { runAgent, type AgentRunner } from '@klym/core';
import { createScriptedModel } from '@klym/core/internal';
import { afterEach, describe, expect, it } from 'vitest';
import { asker, QUESTION } from './support/asking.ts';
import { payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';

const TOKEN = 'the-token-of-grynya-123456';
const OTHER = 'the-token-of-other-1234567';

/** Writes a node on its first step; then says what the write answered. */
const writer: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      steps: ({ options: call }) => {
        const results = call.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
        const wrote = results.find((part) => part.type === 'tool-result' && part.toolName === 'grynya__add_node');
        if (wrote === undefined) {
          const args = {
            node_type: 'Analysis',
            node_data: { id: 'a_1', full_text: 'db-3 ran out of disk' },
            day_id: 'd_2026_11_28',
            time: '2026-11-28T09:00:00Z',
          };
          return { toolCalls: [{ toolName: 'grynya__add_node', args }] };
        }
        return { text: `Wrote: ${JSON.stringify(wrote.type === 'tool-result' ? wrote.output : null)}` };
      },
    }),
  });

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

async function askingTask(): Promise<{ harness: ServerHarness; taskId: string; status: (id: string) => Promise<Record<string, unknown>> }> {
  const harness = await startHarness({ auth: { tokens: { grynya: TOKEN, other: OTHER } }, tasks: { run: asker } });
  cleanups.push(() => harness.cleanup());
  const grynya = await harness.connect('streamable-http', TOKEN);
  const { task_id: taskId } = payload(await grynya.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'Why did errors rise yesterday?' } })) as {
    task_id: string;
  };
  const status = async (id: string): Promise<Record<string, unknown>> =>
    payload(await grynya.callTool({ name: 'check_task_status', arguments: { task_id: id } }));
  await expect.poll(async () => (await status(taskId)).status, { timeout: 20_000 }).toBe('input_required');
  return { harness, taskId, status };
}

describe('a task that asks its caller', () => {
  it('over MCP: check_task_status shows the question, reply_to_agent_task answers it once, and the task completes with the answer', async () => {
    const { harness, taskId, status } = await askingTask();
    expect(await status(taskId)).toMatchObject({ status: 'input_required', question: QUESTION });
    const grynya = await harness.connect('streamable-http', TOKEN);
    const replied = await grynya.callTool({ name: 'reply_to_agent_task', arguments: { task_id: taskId, answer: 'billing' } });
    expect(replied.isError).not.toBe(true);
    const done = await waitForEnd(grynya, taskId, 20_000);
    expect(done).toMatchObject({ status: 'completed' });
    expect(String(done.result)).toContain('billing');
    // Answered once: a second answer is refused, naming why.
    const again = await grynya.callTool({ name: 'reply_to_agent_task', arguments: { task_id: taskId, answer: 'search' } });
    expect(again).toMatchObject({ isError: true, structuredContent: { error: { code: 'TASK_NOT_WAITING' } } });
  });

  it('over REST: POST /api/tasks/:id/reply answers it; another caller cannot', async () => {
    const { harness, taskId, status } = await askingTask();
    const reply = (token: string, answer: string) =>
      fetch(`${harness.server.url}/api/tasks/${taskId}/reply`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ answer }),
      });
    // Another principal's reply finds no such task of its own.
    const stranger = await reply(OTHER, 'search');
    expect(stranger.status).toBe(404);
    expect(await stranger.json()).toMatchObject({ error: { code: 'TASK_NOT_FOUND' } });
    expect((await status(taskId)).status).toBe('input_required');
    const answered = await reply(TOKEN, 'search');
    expect(answered.status).toBe(200);
    await expect.poll(async () => (await status(taskId)).status, { timeout: 20_000 }).toBe('completed');
    expect(String((await status(taskId)).result)).toContain('search');
  });

  it('over MCP: a call that needs approval waits, check_task_status names it, and approve sends it once', async () => {
    const harness = await startHarness({ auth: { tokens: { grynya: TOKEN } }, tasks: { run: writer } });
    cleanups.push(() => harness.cleanup());
    const grynya = await harness.connect('streamable-http', TOKEN);
    const started = await grynya.callTool({
      name: 'start_async_agent_task',
      arguments: { prompt: 'Record why db-3 stopped', tools: { approval: ['grynya__add_node'] } },
    });
    const { task_id: taskId } = payload(started) as { task_id: string };
    const status = async (): Promise<Record<string, unknown>> => payload(await grynya.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }));
    await expect.poll(async () => (await status()).status, { timeout: 20_000 }).toBe('input_required');
    expect(await status()).toMatchObject({ input_kind: 'approval', tool: 'grynya__add_node', question: expect.stringContaining('db-3 ran out of disk') });
    expect(harness.grynya.stats.calls.add_node ?? 0).toBe(0);

    // An answer is not a decision: refused, naming what to send.
    const wrong = await grynya.callTool({ name: 'reply_to_agent_task', arguments: { task_id: taskId, answer: 'yes' } });
    expect(wrong).toMatchObject({ isError: true, structuredContent: { error: { code: 'INVALID_ARGUMENT' } } });
    expect(JSON.stringify(wrong.structuredContent)).toContain('approve: true | false');
    const both = await grynya.callTool({ name: 'reply_to_agent_task', arguments: { task_id: taskId, answer: 'yes', approve: true } });
    expect(both).toMatchObject({ isError: true, structuredContent: { error: { code: 'INVALID_ARGUMENT' } } });

    const approved = await grynya.callTool({ name: 'reply_to_agent_task', arguments: { task_id: taskId, approve: true } });
    expect(payload(approved)).toMatchObject({ status: expect.stringMatching(/^(pending|running|completed)$/), message: expect.stringContaining('(approved)') });
    const done = await waitForEnd(grynya, taskId, 20_000);
    expect(done).toMatchObject({ status: 'completed' });
    expect(String(done.result)).toContain('success');
    expect(harness.grynya.stats.calls.add_node).toBe(1);
  });
});
