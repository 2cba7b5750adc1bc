// Issue #40, the MCP tasks door: a task that asks its caller is `input_required` in both MCP eras, answered as
// each spec defines it. 2025-11-25 with the v2 SDK's own client (Streamable HTTP): `tasks/result` sends the
// client an elicitation related to the task, and its handler's answer goes to the run. 2026-07-28 over raw HTTP
// (the v2 SDK has no Tasks-extension client: it refuses a `resultType: "task"`): the elicitation in the task's
// `inputRequests`, answered through `tasks/update`. A client without elicitation answers with reply_to_agent_task.
import { DECLINED_ANSWER } from '@klym/core/mcp';
import { Client, StreamableHTTPClientTransport, type ElicitRequestFormParams, type ElicitResult } from '@modelcontextprotocol/client';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport as StreamableHTTPClientTransport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { asker, QUESTION } from './support/asking.ts';
import { streamTool, textOf } from './support/mcp-tasks.ts';
import { mcp20260728Call, mcp20260728Post, readEvents, type Mcp20260728Answer } from './support/mcp-2026-07-28.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKEN = 'the-token-of-grynya-123456';
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const ANY = z.looseObject({});
const ELICITATION = { elicitation: { form: {} } };

let harness: ServerHarness | undefined;
const clients: (Client | Client1)[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  await harness?.cleanup();
  harness = undefined;
});

const start = async (): Promise<ServerHarness> => (harness = await startHarness({ auth: { tokens: { grynya: TOKEN } }, tasks: { run: asker } }));

/** The v2 SDK's client on a 2025-11-25 session; with `answer`, it takes form elicitations and answers them so. */
async function client20251125(answer?: (params: ElicitRequestFormParams) => ElicitResult | Promise<ElicitResult>): Promise<Client> {
  const client = new Client(
    { name: 'grynya-v2', version: '2.0.0' },
    { versionNegotiation: { mode: 'legacy' }, capabilities: answer === undefined ? {} : ELICITATION },
  );
  if (answer !== undefined) client.setRequestHandler('elicitation/create', (request) => answer(request.params as ElicitRequestFormParams));
  await client.connect(new StreamableHTTPClientTransport(new URL(harness!.server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
  clients.push(client);
  return client;
}

type McpTask = { taskId: string; status: string; statusMessage?: string };

/** Starts `run_agent_task` as a 2025-11-25 task and waits until it asks. */
async function askingTask20251125(client: Client): Promise<McpTask> {
  const created = (await client.request(
    { method: 'tools/call', params: { name: 'run_agent_task', arguments: { prompt: 'Why did errors rise?' }, task: {} } },
    ANY,
  )) as {
    task: McpTask;
  };
  let task: McpTask | undefined;
  await expect
    .poll(async () => (task = (await client.request({ method: 'tasks/get', params: { taskId: created.task.taskId } }, ANY)) as McpTask).status, {
      timeout: 20_000,
    })
    .toBe('input_required');
  return task!;
}

const taskResult = (client: Client, taskId: string) =>
  client.request({ method: 'tasks/result', params: { taskId } }, ANY, { timeout: 30_000 }) as Promise<{
    content: { text: string }[];
    _meta?: Record<string, unknown>;
  }>;

describe('MCP 2025-11-25 tasks: input_required, answered through tasks/result', () => {
  it("sends the client an elicitation related to the task from tasks/result; the handler's answer goes to the run and the result has it", async () => {
    await start();
    const asked: ElicitRequestFormParams[] = [];
    const client = await client20251125((params) => {
      asked.push(params);
      return { action: 'accept', content: { answer: 'billing' } };
    });
    const told: McpTask[] = [];
    // The v2 SDK types only the notifications of 2026-07-28; its 2025-11-25 session still delivers this one.
    client.setNotificationHandler('notifications/tasks/status' as never, (notification: { params: McpTask }) => void told.push(notification.params));
    const task = await askingTask20251125(client);
    expect(task).toMatchObject({ status: 'input_required', statusMessage: QUESTION });

    const result = await taskResult(client, task.taskId);
    expect(asked).toEqual([
      {
        mode: 'form',
        message: QUESTION,
        requestedSchema: { type: 'object', properties: { answer: expect.objectContaining({ type: 'string' }) }, required: ['answer'] },
        _meta: { [RELATED_TASK]: { taskId: task.taskId } },
      },
    ]);
    expect(result.content[0]?.text).toContain('billing');
    expect(result['_meta']?.[RELATED_TASK]).toEqual({ taskId: task.taskId });
    await expect.poll(() => told.filter((one) => one.taskId === task.taskId).map((one) => one.status)).toEqual(['input_required', 'working', 'completed']);
  });

  it('tells a client without elicitation to use reply_to_agent_task, refuses a reply of the wrong kind by name, and its answer ends the waiting tasks/result', async () => {
    await start();
    const client = await client20251125();
    const task = await askingTask20251125(client);
    expect(task.statusMessage).toBe(`${QUESTION} (answer with reply_to_agent_task { task_id: "${task.taskId}", answer })`);
    const waiting = taskResult(client, task.taskId);

    const wrong = await client.callTool({ name: 'reply_to_agent_task', arguments: { task_id: task.taskId, approve: true } });
    expect(wrong).toMatchObject({ isError: true, structuredContent: { error: { code: 'INVALID_ARGUMENT' } } });
    expect(JSON.stringify(wrong.content)).toContain('waits for an answer to its question: reply { answer:');
    expect(((await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, ANY)) as McpTask).status).toBe('input_required');

    const replied = await client.callTool({ name: 'reply_to_agent_task', arguments: { task_id: task.taskId, answer: 'search' } });
    expect(replied.isError).not.toBe(true);
    expect((await waiting).content[0]?.text).toContain('search');
  });

  it('leaves the task waiting when the elicitation is cancelled; a later tasks/result asks again, and a decline tells the model the question was declined', async () => {
    await start();
    const actions: ElicitResult['action'][] = ['cancel', 'decline'];
    const client = await client20251125(() => ({ action: actions.shift() ?? 'cancel' }));
    const task = await askingTask20251125(client);
    const first = taskResult(client, task.taskId);
    await expect.poll(() => actions.length).toBe(1);
    expect(((await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, ANY)) as McpTask).status).toBe('input_required');

    const second = await taskResult(client, task.taskId);
    expect(second.content[0]?.text).toContain(DECLINED_ANSWER);
    expect((await first).content[0]?.text).toBe(second.content[0]?.text);
  });
});

for (const kind of ['streamable-http', 'sse'] as const) {
  it(`MCP 2025-11-25 over ${kind}: the 1.x SDK's callToolStream, seeing input_required, calls tasks/result, and its elicitation handler's answer ends the task`, async () => {
    await start();
    const client = new Client1({ name: 'grynya', version: '1.0.0' }, { capabilities: ELICITATION });
    const asked: unknown[] = [];
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params);
      return { action: 'accept', content: { answer: 'billing' } };
    });
    const url = new URL(kind === 'sse' ? harness!.server.sseUrl : harness!.server.mcpUrl);
    const requestInit = { headers: { Authorization: `Bearer ${TOKEN}` } };
    await client.connect(kind === 'sse' ? new SSEClientTransport(url, { requestInit }) : new StreamableHTTPClientTransport1(url, { requestInit }));
    clients.push(client);

    const streamed = await streamTool(client, 'run_agent_task', { prompt: 'Why did errors rise?' });
    expect(streamed.error).toBeUndefined();
    expect(streamed.statuses.at(-1)).toMatchObject({ status: 'input_required', statusMessage: QUESTION });
    expect(asked).toEqual([expect.objectContaining({ message: QUESTION, _meta: { [RELATED_TASK]: { taskId: streamed.created?.taskId } } })]);
    expect(textOf(streamed.result)).toContain('billing');
  });
}

/** Calls a 2026-07-28 method as a client that declares the Tasks extension and, with `elicits`, form elicitation. */
const call20260728 = (method: string, params: Record<string, unknown>, elicits: boolean): Promise<Mcp20260728Answer> =>
  mcp20260728Call(harness!.server.mcpUrl, TOKEN, method, params, elicits ? { capabilities: ELICITATION } : {});

type DetailedTask = McpTask & { inputRequests?: Record<string, { method: string; params: ElicitRequestFormParams }>; result?: { content: { text: string }[] } };

/** Polls `tasks/get` of `taskId` until it is `status`. */
async function untilStatus(taskId: string, status: string, elicits: boolean): Promise<DetailedTask> {
  let task: DetailedTask | undefined;
  await expect
    .poll(async () => (task = (await call20260728('tasks/get', { taskId }, elicits)).result as DetailedTask).status, { timeout: 20_000 })
    .toBe(status);
  return task!;
}

async function askingTask20260728(elicits: boolean): Promise<DetailedTask> {
  const call = await call20260728('tools/call', { name: 'run_agent_task', arguments: { prompt: 'Why did errors rise?' } }, elicits);
  return untilStatus(String(call.result?.['taskId']), 'input_required', elicits);
}

describe('MCP 2026-07-28 Tasks extension: input_required with inputRequests, answered through tasks/update', () => {
  it('shows the elicitation in inputRequests; tasks/update refuses a response that does not fit it, takes the answer, and ignores a second', async () => {
    await start();
    const task = await askingTask20260728(true);
    expect(task.statusMessage).toBe(QUESTION);
    const [key, ...others] = Object.keys(task.inputRequests ?? {});
    expect(others).toEqual([]);
    expect(task.inputRequests?.[key!]).toEqual({
      method: 'elicitation/create',
      params: {
        mode: 'form',
        message: QUESTION,
        requestedSchema: { type: 'object', properties: { answer: expect.objectContaining({ type: 'string' }) }, required: ['answer'] },
      },
    });

    const wrong = await call20260728(
      'tasks/update',
      { taskId: task.taskId, inputResponses: { [key!]: { action: 'accept', content: { approve: true } } } },
      true,
    );
    expect(wrong.error).toMatchObject({ code: -32602, message: expect.stringContaining('A question takes `answer` (a string)') });
    expect((await untilStatus(task.taskId, 'input_required', true)).inputRequests).toHaveProperty([key!]);

    const answered = await call20260728(
      'tasks/update',
      { taskId: task.taskId, inputResponses: { [key!]: { action: 'accept', content: { answer: 'billing' } } } },
      true,
    );
    expect(answered.result).toEqual({ resultType: 'complete', _meta: expect.anything() });
    const done = await untilStatus(task.taskId, 'completed', true);
    expect(done.result?.content[0]?.text).toContain('billing');
    // The key was answered: a second response to it is ignored, as the extension has it, and changes nothing.
    const again = await call20260728(
      'tasks/update',
      { taskId: task.taskId, inputResponses: { [key!]: { action: 'accept', content: { answer: 'search' } } } },
      true,
    );
    expect(again.error).toBeUndefined();
    expect((await untilStatus(task.taskId, 'completed', true)).result?.content[0]?.text).toContain('billing');
  });

  it('tells a subscriptions/listen of the ask with its input request, then of the end once tasks/update answered it', async () => {
    await start();
    const call = await call20260728('tools/call', { name: 'run_agent_task', arguments: { prompt: 'Why did errors rise?' } }, true);
    const taskId = String(call.result?.['taskId']);
    const listen = await mcp20260728Post(
      harness!.server.mcpUrl,
      TOKEN,
      { jsonrpc: '2.0', id: 'sub-1', method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] } } },
      { capabilities: ELICITATION },
    );
    const events = readEvents(listen, 20_000);
    const key = Object.keys((await untilStatus(taskId, 'input_required', true)).inputRequests ?? {})[0]!;
    await call20260728('tasks/update', { taskId, inputResponses: { [key]: { action: 'accept', content: { answer: 'billing' } } } }, true);

    const told = (await events).filter((event) => event.method === 'notifications/tasks').map((event) => event.params as DetailedTask);
    expect(told.find((task) => task.status === 'input_required')).toMatchObject({
      statusMessage: QUESTION,
      inputRequests: { [key]: { method: 'elicitation/create', params: { message: QUESTION } } },
    });
    expect(told.at(-1)).toMatchObject({ status: 'completed', result: { content: [{ text: expect.stringContaining('billing') }] } });
  });

  it('sends no input request to a client without elicitation, names reply_to_agent_task instead, and that reply completes the task', async () => {
    await start();
    const task = await askingTask20260728(false);
    expect(task.inputRequests).toEqual({});
    expect(task.statusMessage).toBe(`${QUESTION} (answer with reply_to_agent_task { task_id: "${task.taskId}", answer })`);
    const replied = await call20260728('tools/call', { name: 'reply_to_agent_task', arguments: { task_id: task.taskId, answer: 'search' } }, false);
    expect(replied.result?.['isError']).not.toBe(true);
    expect((await untilStatus(task.taskId, 'completed', false)).result?.content[0]?.text).toContain('search');
  });
});
