// Issue #40: a task that asks its caller, as Grynya meets it over HTTP: the official MCP client sees the
// question in check_task_status and answers with reply_to_agent_task; over REST, POST /api/tasks/:id/reply.
import { afterEach, describe, expect, it } from 'vitest';
import { asker, QUESTION, writer } from './support/asking.ts';
import { payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';

const TOKEN = 'the-token-of-grynya-123456';
const OTHER = 'the-token-of-other-1234567';

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

  it('over REST: a body that is not a reply gets 400 naming the field, and the task keeps waiting; a second reply gets 409', async () => {
    const { harness, taskId, status } = await askingTask();
    const post = async (body: string): Promise<{ status: number; error: { code?: string; message?: string } }> => {
      const response = await fetch(`${harness.server.url}/api/tasks/${taskId}/reply`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body,
      });
      return { status: response.status, error: ((await response.json()) as { error: { code?: string; message?: string } }).error };
    };
    const refusals: [string, RegExp][] = [
      ['not json', /^`body`: not valid JSON/],
      ['["billing"]', /^`body`: expected a JSON object/],
      ['{}', /Give `answer` \(to a question\) or `approve`/],
      ['{"answer": 42}', /^`answer`: /],
      ['{"answer": ""}', /^`answer`: /],
      ['{"approve": "yes"}', /^`approve`: /],
      ['{"answr": "billing"}', /^`answr`: /],
      ['{"answer": "billing", "approve": true}', /either `answer` .* or `approve` .*not both/],
      ['{"answer": "billing", "reason": "because"}', /`reason` goes with `approve`/],
      ['{"answer": "billing", "task_id": "task_other"}', /^`task_id`: the task is the one in the path/],
      // A decision to a question: the manager refuses the wrong kind by name.
      ['{"approve": true}', /waits for an answer to its question: reply \{ answer/],
    ];
    for (const [body, message] of refusals) {
      const refused = await post(body);
      expect({ body, ...refused }).toMatchObject({ body, status: 400, error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(message) } });
    }
    expect((await status(taskId)).status).toBe('input_required');

    expect((await post('{"answer": "billing"}')).status).toBe(200);
    const again = await post('{"answer": "search"}');
    expect(again).toMatchObject({ status: 409, error: { code: 'TASK_NOT_WAITING' } });
    await expect.poll(async () => (await status(taskId)).status, { timeout: 20_000 }).toBe('completed');
    expect(String((await status(taskId)).result)).toContain('billing');
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

  it('over REST: an approval takes { approve, reason }; an answer or a reason of the wrong type gets 400 naming it; a denial reaches the model', async () => {
    const harness = await startHarness({ auth: { tokens: { grynya: TOKEN } }, tasks: { run: writer } });
    cleanups.push(() => harness.cleanup());
    const call = async (route: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
      const response = await fetch(`${harness.server.url}${route}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, json: (await response.json()) as Record<string, unknown> };
    };
    const started = await call('/api/tasks', { prompt: 'Record why db-3 stopped', tools: { approval: ['grynya__add_node'] } });
    const taskId = String(started.json.task_id);
    await expect.poll(async () => (await call(`/api/tasks/${taskId}`, undefined)).json.status, { timeout: 20_000 }).toBe('input_required');

    const answer = await call(`/api/tasks/${taskId}/reply`, { answer: 'yes' });
    expect(answer).toMatchObject({
      status: 400,
      json: { error: { code: 'INVALID_ARGUMENT', message: expect.stringContaining('reply { approve: true | false, reason? }, not an `answer`') } },
    });
    const reason = await call(`/api/tasks/${taskId}/reply`, { approve: false, reason: 42 });
    expect(reason).toMatchObject({ status: 400, json: { error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`reason`: /) } } });

    const denied = await call(`/api/tasks/${taskId}/reply`, { approve: false, reason: 'not in the graph today' });
    expect(denied).toMatchObject({ status: 200, json: { message: expect.stringContaining('(denied)') } });
    await expect.poll(async () => (await call(`/api/tasks/${taskId}`, undefined)).json.status, { timeout: 20_000 }).toBe('completed');
    expect(String((await call(`/api/tasks/${taskId}?full_result=true`, undefined)).json.result)).toContain('Denied by the caller: not in the graph today');
    expect(harness.grynya.stats.calls.add_node ?? 0).toBe(0);
    expect(await call(`/api/tasks/${taskId}/reply`, { approve: true })).toMatchObject({ status: 409, json: { error: { code: 'TASK_NOT_WAITING' } } });
  });
});
