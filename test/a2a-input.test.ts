// Issue #40, the A2A door: a task that asks its caller is TASK_STATE_INPUT_REQUIRED with the question, and a
// SendMessage carrying its id answers it — with @a2a-js/sdk's own client against a Klym server on loopback, a
// scripted model that calls klym__ask_caller and then uses the answer, and a local push receiver.
import { StreamResponse, TaskState, type Message, type Part, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { runAgent, type AgentRunner, type TaskService } from '@klym/core';
import { a2aPush, createA2aEndpoint } from '@klym/core/a2a';
import { createScriptedModel } from '@klym/core/internal';
import { afterEach, describe, expect, it } from 'vitest';
import { a2aClient, textMessage } from './support/a2a-client.ts';
import { startPushReceiver, type PushReceiver } from './support/push-receiver.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKENS = { grynya: 'a2a-input-token-grynya-0123456789', other: 'a2a-input-token-other-0123456789' };
const QUESTION = 'Which service: billing or search?';

/** Releases the runs of prompts that say "hold" from their first step (so a test can catch a task running). */
let release: () => void = () => {};
let held = new Promise<void>((resolve) => (release = resolve));

/** The call a "Record" prompt makes, whose tool the test's tasks have wait for approval. */
const FINDING = { toolName: 'grynya__add_node', input: { node_type: 'Finding', node_data: { id: 'finding-1', text: 'disk full on db-3' } } };

/**
 * Asks on its first step (a "hold" prompt waits for `release` first), then answers with what the ask's result said;
 * a "Record" prompt instead calls FINDING's tool, then answers with what that call's result said.
 */
const asker: AgentRunner = (options) =>
  runAgent({
    ...options,
    model: createScriptedModel({
      steps: async ({ options: call }) => {
        const results = call.prompt.flatMap((message) => (message.role === 'tool' ? message.content : []));
        if (JSON.stringify(call.prompt).includes('Record')) {
          const written = results.find((part) => part.type === 'tool-result' && part.toolName === FINDING.toolName);
          if (written === undefined) return { toolCalls: [{ toolName: FINDING.toolName, args: FINDING.input }] };
          return { text: `The write said ${JSON.stringify(written.type === 'tool-result' ? written.output : null)}` };
        }
        const answer = results.find((part) => part.type === 'tool-result' && part.toolName === 'klym__ask_caller');
        if (answer === undefined) {
          if (JSON.stringify(call.prompt).includes('hold')) await held;
          return { toolCalls: [{ toolName: 'klym__ask_caller', args: { question: QUESTION } }] };
        }
        return { text: `Looking at ${JSON.stringify(answer.type === 'tool-result' ? answer.output : null)}` };
      },
    }),
  });

let harness: ServerHarness | undefined;
let pushReceiver: PushReceiver | undefined;
afterEach(async () => {
  release();
  held = new Promise<void>((resolve) => (release = resolve));
  await harness?.cleanup();
  await pushReceiver?.close();
  harness = undefined;
  pushReceiver = undefined;
});

async function start(): Promise<{ url: string; client: Client; receiver: PushReceiver }> {
  const receiver = await startPushReceiver();
  pushReceiver = receiver;
  harness = await startHarness({
    auth: { tokens: TOKENS },
    tasks: { run: asker, push: a2aPush({ allow: [`${receiver.origin}/hooks`], retryDelayMs: 50, maxRetryDelayMs: 200 }) },
  });
  return { url: harness.server.url, client: await a2aClient(harness.server.url, TOKENS.grynya), receiver };
}

const send = (client: Client, message: Message, returnImmediately = false) =>
  client.sendMessage({
    tenant: '',
    message,
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
    metadata: undefined,
  }) as Promise<Task>;
const answerOf = (taskId: string, text: string, extra: Partial<Message> = {}) => textMessage(text, { taskId, ...extra });
const dataMessage = (taskId: string, value: Record<string, unknown>): Message => ({
  ...textMessage('', { taskId }),
  parts: [{ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' } satisfies Part],
});
const textOfPart = (part: Part | undefined): string | undefined => (part?.content?.$case === 'text' ? part.content.value : undefined);
const resultOf = (task: Task): string | undefined => textOfPart(task.artifacts.find((artifact) => artifact.artifactId === 'result')?.parts[0]);
/** A task's history as [role, first text] pairs. */
const historyTexts = (task: Task): [number, string | undefined][] => task.history.map((message) => [message.role, textOfPart(message.parts[0])]);
const stateOf = async (client: Client, id: string) => (await client.getTask({ tenant: '', id })).status?.state;

/** A stream event as a test reads it: its case and the state it tells of, with the status message's text. */
function eventOf(event: StreamResponse): { case: string | undefined; state?: TaskState; text?: string } {
  const { payload } = event;
  if (payload?.$case === 'task') return { case: 'task', state: payload.value.status?.state };
  if (payload?.$case === 'statusUpdate') {
    const text = textOfPart(payload.value.status?.message?.parts[0]);
    return { case: 'statusUpdate', state: payload.value.status?.state, ...(text === undefined ? {} : { text }) };
  }
  return { case: payload?.$case };
}

describe('A2A: a task that asks its caller, with the @a2a-js/sdk client', () => {
  it('a blocking SendMessage returns at TASK_STATE_INPUT_REQUIRED with the question; a blocking answer returns the task completed with it', async () => {
    const { client } = await start();
    const asked = await send(client, textMessage('Why did errors rise yesterday?'));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(asked.status?.message).toMatchObject({ role: 2, taskId: asked.id, metadata: { klym: { kind: 'question' } } });
    expect(textOfPart(asked.status?.message?.parts[0])).toBe(QUESTION);

    const done = await send(client, answerOf(asked.id, 'billing', { contextId: asked.contextId }));
    expect(done).toMatchObject({ id: asked.id, status: { state: TaskState.TASK_STATE_COMPLETED } });
    expect(resultOf(done)).toContain('billing');

    // A message to a finished task: UnsupportedOperationError (-32004, A2A §3.1.1).
    await expect(send(client, answerOf(asked.id, 'search'))).rejects.toMatchObject({ name: 'UnsupportedOperationError' });
  });

  it('keeps the conversation as the task’s history: the prompt, the question, the answer, oldest first; historyLength cuts it', async () => {
    const { client } = await start();
    const asked = await send(client, textMessage('Why did errors rise yesterday?'));
    await send(client, answerOf(asked.id, 'billing'));
    const whole = await client.getTask({ tenant: '', id: asked.id, historyLength: 10 });
    // ROLE_USER is 1, ROLE_AGENT 2.
    expect(historyTexts(whole)).toEqual([
      [1, 'Why did errors rise yesterday?'],
      [2, QUESTION],
      [1, 'billing'],
    ]);
    expect(whole.history.every((message) => message.taskId === asked.id)).toBe(true);
    expect(historyTexts(await client.getTask({ tenant: '', id: asked.id, historyLength: 2 }))).toEqual([
      [2, QUESTION],
      [1, 'billing'],
    ]);
    expect((await client.getTask({ tenant: '', id: asked.id, historyLength: 0 })).history).toEqual([]);
  });

  it('returnImmediately answers at once; the same answer sent again is taken as the first; a running task, one already answered, a wrong reply and a stranger are refused by name', async () => {
    const { client, url } = await start();
    const started = await send(client, textMessage('Why did errors rise yesterday? (hold)'), true);
    expect(started.status?.state).toBeOneOf([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]);
    await expect.poll(() => stateOf(client, started.id), { timeout: 10_000 }).toBe(TaskState.TASK_STATE_WORKING);
    // Running: it asks nothing, so a message is not an answer (UnsupportedOperationError, the request itself being valid).
    await expect(send(client, answerOf(started.id, 'billing'), true)).rejects.toMatchObject({
      name: 'UnsupportedOperationError',
      message: expect.stringContaining('TASK_STATE_WORKING'),
    });
    release();
    await expect.poll(() => stateOf(client, started.id), { timeout: 10_000 }).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);

    // Another principal's task is not found; a question answered with a decision, a file, or another context are refused.
    const stranger = await a2aClient(url, TOKENS.other);
    await expect(send(stranger, answerOf(started.id, 'search'), true)).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    await expect(send(client, dataMessage(started.id, { approve: true }), true)).rejects.toMatchObject({
      name: 'RequestMalformedError',
      message: expect.stringContaining('waits for an answer to its question'),
    });
    const file: Message = {
      ...answerOf(started.id, ''),
      parts: [{ content: { $case: 'url', value: 'https://example.com/a.txt' }, metadata: undefined, filename: 'a.txt', mediaType: 'text/plain' }],
    };
    await expect(send(client, file, true)).rejects.toMatchObject({ name: 'ContentTypeNotSupportedError' });
    await expect(send(client, answerOf(started.id, 'billing', { contextId: 'another-context' }), true)).rejects.toMatchObject({
      name: 'RequestMalformedError',
      message: expect.stringContaining('contextId'),
    });
    expect(await stateOf(client, started.id)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);

    const answer = answerOf(started.id, 'search');
    const answered = await send(client, answer, true);
    expect(answered.status?.state).toBeOneOf([TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]);
    // The same message again (a retry after a lost response) is the same answer: the task as it stands, not an error.
    expect((await send(client, answer, true)).id).toBe(started.id);
    // The first answer wins: a second one, while the task goes on or after it ended, is refused; so is another text
    // under the first one's messageId (a new answer, not a retry).
    await expect(send(client, answerOf(started.id, 'billing'), true)).rejects.toMatchObject({ name: 'UnsupportedOperationError' });
    await expect(send(client, { ...answerOf(started.id, 'billing'), messageId: answer.messageId }, true)).rejects.toMatchObject({
      name: 'UnsupportedOperationError',
    });
    await expect.poll(() => stateOf(client, started.id), { timeout: 10_000 }).toBe(TaskState.TASK_STATE_COMPLETED);
    const done = await client.getTask({ tenant: '', id: started.id, historyLength: 10 });
    expect(resultOf(done)).toContain('search');
    // Once ended too, the same message answers with the task; the history holds the answer once.
    expect((await send(client, answer, true)).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.history.filter((message) => textOfPart(message.parts[0]) === 'search')).toHaveLength(1);
  });

  it('SendStreamingMessage closes at INPUT_REQUIRED, SubscribeToTask shows it and goes on; the answer streams on to the end', async () => {
    const { client } = await start();
    const first: ReturnType<typeof eventOf>[] = [];
    let taskId = '';
    for await (const event of client.sendMessageStream({
      tenant: '',
      message: textMessage('Why did errors rise yesterday?'),
      configuration: undefined,
      metadata: undefined,
    })) {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      first.push(eventOf(event));
    }
    expect(first[0]?.case).toBe('task');
    expect(first.at(-1)).toEqual({ case: 'statusUpdate', state: TaskState.TASK_STATE_INPUT_REQUIRED, text: QUESTION });

    // A subscription made while it waits: the Task (INPUT_REQUIRED) first, and it goes on after the answer to the end.
    const subscribed: ReturnType<typeof eventOf>[] = [];
    const subscription = (async () => {
      for await (const event of client.resubscribeTask({ tenant: '', id: taskId })) subscribed.push(eventOf(event));
    })();
    await expect.poll(() => subscribed.length, { timeout: 5_000 }).toBeGreaterThan(0);
    expect(subscribed[0]).toEqual({ case: 'task', state: TaskState.TASK_STATE_INPUT_REQUIRED });

    const answered: ReturnType<typeof eventOf>[] = [];
    for await (const event of client.sendMessageStream({ tenant: '', message: answerOf(taskId, 'billing'), configuration: undefined, metadata: undefined }))
      answered.push(eventOf(event));
    expect(answered[0]).toEqual({ case: 'task', state: TaskState.TASK_STATE_WORKING });
    expect(answered.at(-2)?.case).toBe('artifactUpdate');
    expect(answered.at(-1)).toMatchObject({ case: 'statusUpdate', state: TaskState.TASK_STATE_COMPLETED });

    await subscription;
    expect(subscribed.map((event) => event.state).filter((state) => state !== undefined)).toContain(TaskState.TASK_STATE_WORKING);
    expect(subscribed.at(-1)).toMatchObject({ case: 'statusUpdate', state: TaskState.TASK_STATE_COMPLETED });
    expect(resultOf(await client.getTask({ tenant: '', id: taskId }))).toContain('billing');
  });

  it('pushes INPUT_REQUIRED with the question, and WORKING, the result and COMPLETED after the answer', async () => {
    const { client, receiver } = await start();
    const asked = (await client.sendMessage({
      tenant: '',
      message: textMessage('Why did errors rise yesterday?'),
      configuration: {
        acceptedOutputModes: [],
        taskPushNotificationConfig: { tenant: '', id: '', taskId: '', url: `${receiver.origin}/hooks/a`, token: 'receiver-token', authentication: undefined },
        returnImmediately: false,
      },
      metadata: undefined,
    })) as Task;
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const pushed = () => receiver.to('/hooks/a').map((request) => eventOf(StreamResponse.fromJSON(request.json)));
    await expect.poll(() => pushed().at(-1), { timeout: 10_000 }).toEqual({ case: 'statusUpdate', state: TaskState.TASK_STATE_INPUT_REQUIRED, text: QUESTION });
    expect(receiver.to('/hooks/a')[0]?.headers['x-a2a-notification-token']).toBe('receiver-token');

    await send(client, answerOf(asked.id, 'billing'));
    await expect.poll(() => pushed().at(-1)?.state, { timeout: 10_000 }).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(pushed()).toEqual([
      { case: 'task', state: TaskState.TASK_STATE_SUBMITTED },
      { case: 'statusUpdate', state: TaskState.TASK_STATE_WORKING, text: expect.any(String) },
      { case: 'statusUpdate', state: TaskState.TASK_STATE_INPUT_REQUIRED, text: QUESTION },
      { case: 'statusUpdate', state: TaskState.TASK_STATE_WORKING, text: expect.any(String) },
      { case: 'artifactUpdate' },
      { case: 'statusUpdate', state: TaskState.TASK_STATE_COMPLETED },
    ]);
  });
});

/** A task whose request has FINDING's tool wait for approval (metadata.klym.tools.approval), run until it asks. */
async function approvalTask(client: Client): Promise<Task> {
  const asked = await send(client, textMessage('Record the finding', { metadata: { klym: { tools: { approval: [FINDING.toolName] } } } }));
  expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
  // The call, as data a program can decide on, and how to reply.
  expect(asked.status?.message?.parts[1]).toMatchObject({ content: { $case: 'data', value: FINDING } });
  expect(asked.status?.message?.metadata).toMatchObject({ klym: { kind: 'approval' } });
  return asked;
}

describe('A2A: a call that waits for the caller’s approval', () => {
  it('approved with a data part { approve: true }: the call reaches the upstream and the task completes with its result', async () => {
    const { client } = await start();
    const asked = await approvalTask(client);
    expect(harness?.grynya.stats.calls.add_node ?? 0).toBe(0);
    // An answer in words is not a decision.
    await expect(send(client, answerOf(asked.id, 'yes'))).rejects.toMatchObject({ name: 'RequestMalformedError', message: expect.stringContaining('approve') });
    const done = await send(client, dataMessage(asked.id, { approve: true }));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(harness?.grynya.stats.calls.add_node).toBe(1);
    expect(resultOf(done)).toMatch(/The write said/);
    expect(resultOf(done)).not.toMatch(/Denied/);
  });

  it('denied with a reason: the model reads "denied by the caller" and the reason, and the call is never sent', async () => {
    const { client } = await start();
    const asked = await approvalTask(client);
    const done = await send(client, dataMessage(asked.id, { approve: false, reason: 'db-3 is being replaced today' }));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(resultOf(done)).toMatch(/Denied by the caller: db-3 is being replaced today/);
    expect(harness?.grynya.stats.calls.add_node ?? 0).toBe(0);
  });
});

describe('A2A: a stream of a task that waits', () => {
  it('stops watching the task once its client goes, though the task waits on (for up to a day)', async () => {
    const { client } = await start();
    const asked = await send(client, textMessage('Why did errors rise yesterday?'));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    // The same service behind an endpoint of the test's own, its reads of the task counted.
    const service = harness?.server.klym.service as TaskService;
    let reads = 0;
    const tasks = new Proxy(service.tasks, {
      get: (target, key) => (key === 'get' ? (...args: Parameters<TaskService['tasks']['get']>) => (reads++, target.get(...args)) : Reflect.get(target, key)),
    });
    const endpoint = createA2aEndpoint({ ...service, tasks }, { version: '0.0.0', pollIntervalMs: 10 });
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: asked.id } });
    const response = await endpoint.handle(body, new Headers({ 'A2A-Version': '1.0' }), 'grynya');
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('TASK_STATE_INPUT_REQUIRED');
    await expect.poll(() => reads, { timeout: 2_000 }).toBeGreaterThan(3); // it polls while the client is there
    await reader.cancel();
    const atCancel = reads;
    // Twenty poll intervals later it has not read the task again (one read under way at the cancel may finish).
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(reads - atCancel).toBeLessThanOrEqual(1);
  });
});
