// Issue #40, the MCP tasks door for approvals: a task whose call waits for its caller's approval
// (`tools.approval`) is `input_required` with the call in words; 2025-11-25's `tasks/result` asks the v2 SDK
// client's elicitation handler (a boolean `approve`, a string `reason`), 2026-07-28's `tasks/update` answers the
// task's input request. Approving sends the call; denying (or declining) never does, and the model reads why.
import { Client, StreamableHTTPClientTransport, type ElicitRequestFormParams, type ElicitResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { querier } from './support/asking.ts';
import { mcp20260728Call } from './support/mcp-2026-07-28.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKEN = 'the-token-of-grynya-123456';
const ANY = z.looseObject({});
const CALL = 'Approve the call of grynya__query_graph with {"query":"RETURN 1"}?';
const ARGUMENTS = { prompt: 'Count the nodes', tools: { approval: ['grynya__query_graph'] } };

let harness: ServerHarness | undefined;
const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  await harness?.cleanup();
  harness = undefined;
});

const queries = (): number => harness!.grynya.stats.calls.query_graph ?? 0;

/** Starts the harness and, over 2025-11-25, a task waiting for approval of its query, its client answering elicitations with `decide`. */
async function waitingTask(
  decide: (params: ElicitRequestFormParams) => ElicitResult,
): Promise<{ client: Client; taskId: string; asked: ElicitRequestFormParams[] }> {
  harness = await startHarness({ auth: { tokens: { grynya: TOKEN } }, tasks: { run: querier } });
  const asked: ElicitRequestFormParams[] = [];
  const client = new Client({ name: 'grynya-v2', version: '2.0.0' }, { versionNegotiation: { mode: 'legacy' }, capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler('elicitation/create', (request) => {
    asked.push(request.params as ElicitRequestFormParams);
    return decide(request.params as ElicitRequestFormParams);
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(harness.server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
  clients.push(client);
  const created = (await client.request({ method: 'tools/call', params: { name: 'run_agent_task', arguments: ARGUMENTS, task: {} } }, ANY)) as {
    task: { taskId: string };
  };
  const taskId = created.task.taskId;
  await expect
    .poll(async () => client.request({ method: 'tasks/get', params: { taskId } }, ANY), { timeout: 20_000 })
    .toMatchObject({ status: 'input_required', statusMessage: CALL });
  return { client, taskId, asked };
}

const resultText = async (client: Client, taskId: string): Promise<string> =>
  ((await client.request({ method: 'tasks/result', params: { taskId } }, ANY, { timeout: 30_000 })) as { content: { text: string }[] }).content[0]?.text ?? '';

describe('MCP 2025-11-25: a call waiting for approval, decided through the elicitation of tasks/result', () => {
  it('asks for approve and reason, naming the call; approving sends it and the model reads its answer', async () => {
    const { client, taskId, asked } = await waitingTask(() => ({ action: 'accept', content: { approve: true } }));
    expect(queries()).toBe(0);
    const text = await resultText(client, taskId);
    expect(asked).toEqual([
      expect.objectContaining({
        mode: 'form',
        message: CALL,
        requestedSchema: expect.objectContaining({
          properties: { approve: expect.objectContaining({ type: 'boolean' }), reason: expect.objectContaining({ type: 'string' }) },
          required: ['approve'],
        }),
      }),
    ]);
    expect(queries()).toBe(1);
    expect(text).toMatch(/^The call said /);
    expect(text).not.toContain('Denied');
  });

  it('denies with the reason given, and a decline denies too: the call is never sent, and the model reads why', async () => {
    const denied = await waitingTask(() => ({ action: 'accept', content: { approve: false, reason: 'not before the maintenance window' } }));
    expect(await resultText(denied.client, denied.taskId)).toContain('Denied by the caller: not before the maintenance window. The call was not sent.');
    expect(queries()).toBe(0);
    await Promise.allSettled(clients.splice(0).map((client) => client.close()));
    await harness?.cleanup();

    const declined = await waitingTask(() => ({ action: 'decline' }));
    expect(await resultText(declined.client, declined.taskId)).toContain('Denied by the caller: declined. The call was not sent.');
    expect(queries()).toBe(0);
  });
});

describe('MCP 2026-07-28: a call waiting for approval, decided through tasks/update', () => {
  it('shows the approval as an input request; a response of the wrong kind is refused by name, and a denial completes the task unsent', async () => {
    harness = await startHarness({ auth: { tokens: { grynya: TOKEN } }, tasks: { run: querier } });
    const call = (method: string, params: Record<string, unknown>) =>
      mcp20260728Call(harness!.server.mcpUrl, TOKEN, method, params, { capabilities: { elicitation: { form: {} } } });
    const taskId = String((await call('tools/call', { name: 'run_agent_task', arguments: ARGUMENTS })).result?.['taskId']);
    type Detailed = {
      status: string;
      statusMessage?: string;
      inputRequests?: Record<string, { params: ElicitRequestFormParams }>;
      result?: { content: { text: string }[] };
    };
    let task: Detailed | undefined;
    await expect.poll(async () => (task = (await call('tasks/get', { taskId })).result as Detailed).status, { timeout: 20_000 }).toBe('input_required');
    expect(task?.statusMessage).toBe(CALL);
    const [key] = Object.keys(task?.inputRequests ?? {});
    expect(task?.inputRequests?.[key!]?.params).toMatchObject({ message: CALL, requestedSchema: { required: ['approve'] } });

    const wrong = await call('tasks/update', { taskId, inputResponses: { [key!]: { action: 'accept', content: { answer: 'yes' } } } });
    expect(wrong.error).toMatchObject({ code: -32602, message: expect.stringContaining('grynya__query_graph takes `approve` (a boolean)') });

    await call('tasks/update', { taskId, inputResponses: { [key!]: { action: 'accept', content: { approve: false, reason: 'read-only day' } } } });
    await expect.poll(async () => (task = (await call('tasks/get', { taskId })).result as Detailed).status, { timeout: 20_000 }).toBe('completed');
    expect(task?.result?.content[0]?.text).toContain('Denied by the caller: read-only day. The call was not sent.');
    expect(queries()).toBe(0);
  });
});
