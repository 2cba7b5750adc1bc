// Issue #32 part 6: A2A push notifications through the webhook outbox, on `klym serve` as a process with the
// scripted model, to a receiver on loopback that the operator's `a2a.pushAllow` names.
import { A2A_VERSION_HEADER, StreamResponse, TaskState, type Message, type Task, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveKlym, temporaryDirectory } from './cli-harness.ts';
import { a2aClient, textMessage } from './support/a2a-client.ts';
import { startPushReceiver, type PushReceiver, type PushRequest } from './support/push-receiver.ts';
import { startHarness } from './support/server-harness.ts';
import { freePort } from './support/upstream-servers.ts';

const ALL_WELL = 'Бачу базу та інструменти, полет нормальний';
const TOKEN = 'a2a-push-token-grynya-0123456789';
const RECEIVER_SECRET = 'receiver-credentials-0123456789';

const cleanups: (() => Promise<unknown>)[] = [];
let grynya: FakeGrynya;
let receiver: PushReceiver;
let url: string;
let client: Client;

beforeAll(async () => {
  grynya = await createFakeGrynya();
  // `/hooks/flaky` answers its first request 500; every other request is accepted.
  receiver = await startPushReceiver((request, index) => (request.path === '/hooks/flaky' && index === 0 ? 500 : 200));
  const cwd = temporaryDirectory();
  cleanups.push(
    async () => cwd[Symbol.dispose](),
    () => grynya.close(),
    () => receiver.close(),
  );
  const config = {
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
    server: { port: await freePort(), tokens: { grynya: TOKEN } },
    a2a: { pushAllow: [`${receiver.origin}/hooks`], pushDelivery: { retryDelayMs: 50, maxRetryDelayMs: 200 } },
  };
  writeFileSync(path.join(cwd.path, 'klym.config.json'), JSON.stringify(config));
  ({ url } = await serveKlym(cwd.path, cleanups));
  client = await a2aClient(url, TOKEN);
}, 60_000);
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const pushConfig = (target: string, fields: Partial<TaskPushNotificationConfig> = {}): TaskPushNotificationConfig => ({
  tenant: '',
  id: '',
  taskId: '',
  url: target,
  token: '',
  authentication: { scheme: 'Bearer', credentials: RECEIVER_SECRET },
  ...fields,
});

const sendWithPush = (text: string, config: TaskPushNotificationConfig | undefined, extra: Partial<Message> = {}) =>
  client.sendMessage({
    tenant: '',
    message: textMessage(text, extra),
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: config, returnImmediately: true },
    metadata: undefined,
  }) as Promise<Task>;

/** A push body as the SDK reads a stream event: its case and the state it tells of. */
function eventOf(request: PushRequest): { case: string | undefined; state: TaskState | undefined; taskId: string } {
  const { payload } = StreamResponse.fromJSON(request.json);
  switch (payload?.$case) {
    case 'task':
      return { case: 'task', state: payload.value.status?.state, taskId: payload.value.id };
    case 'statusUpdate':
      return { case: 'statusUpdate', state: payload.value.status?.state, taskId: payload.value.taskId };
    case 'artifactUpdate':
      return { case: 'artifactUpdate', state: undefined, taskId: payload.value.taskId };
    default:
      return { case: payload?.$case, state: undefined, taskId: '' };
  }
}

const RUN_TO_COMPLETION = [
  { case: 'task', state: TaskState.TASK_STATE_SUBMITTED },
  { case: 'statusUpdate', state: TaskState.TASK_STATE_WORKING },
  { case: 'artifactUpdate', state: undefined },
  { case: 'statusUpdate', state: TaskState.TASK_STATE_COMPLETED },
];

async function rpc(method: string, params: unknown): Promise<{ id: number; error?: { code: number; message: string }; result?: unknown }> {
  const response = await fetch(`${url}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, [A2A_VERSION_HEADER]: '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await response.json()) as { id: number; error?: { code: number; message: string } };
}

describe('A2A push notifications on `klym serve`, through the webhook outbox', () => {
  it('says pushNotifications in its card, and POSTs each transition’s StreamResponse with the config’s Authorization, to COMPLETED', async () => {
    expect((await client.getAgentCard()).capabilities?.pushNotifications).toBe(true);
    const task = await sendWithPush('Self-check, please', pushConfig(`${receiver.origin}/hooks/first`));
    await expect.poll(() => receiver.to('/hooks/first').map(eventOf).at(-1)?.state, { timeout: 15_000 }).toBe(TaskState.TASK_STATE_COMPLETED);

    const requests = receiver.to('/hooks/first');
    expect(requests.map(eventOf)).toEqual(RUN_TO_COMPLETION.map((event) => ({ ...event, taskId: task.id })));
    for (const request of requests)
      expect(request.headers).toMatchObject({ authorization: `Bearer ${RECEIVER_SECRET}`, 'content-type': 'application/a2a+json' });
    const result = StreamResponse.fromJSON(requests[2]?.json).payload;
    expect(result?.$case === 'artifactUpdate' ? result.value.artifact?.parts[0]?.content : undefined).toMatchObject({
      $case: 'text',
      value: expect.stringMatching(new RegExp(`^${ALL_WELL}`, 'm')),
    });
    // The config given with the message is the task's: it reads back, credentials and all, to its owner.
    const { configs } = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    expect(configs).toEqual([
      expect.objectContaining({ taskId: task.id, url: `${receiver.origin}/hooks/first`, authentication: { scheme: 'Bearer', credentials: RECEIVER_SECRET } }),
    ]);
  });

  it('delivers every transition again in order after the receiver answered 500 once: the outbox retries', async () => {
    const task = await sendWithPush('Self-check, please', pushConfig(`${receiver.origin}/hooks/flaky`));
    await expect.poll(() => receiver.to('/hooks/flaky').map(eventOf).at(-1)?.state, { timeout: 15_000 }).toBe(TaskState.TASK_STATE_COMPLETED);
    const requests = receiver.to('/hooks/flaky');
    // The first request was answered 500 and sent again, the same body under the same webhook-id, before anything after it.
    expect(requests.map(eventOf)).toEqual([RUN_TO_COMPLETION[0], ...RUN_TO_COMPLETION].map((event) => ({ ...event, taskId: task.id })));
    expect(requests[1]?.body).toBe(requests[0]?.body);
    expect(requests[1]?.headers['webhook-id']).toBe(requests[0]?.headers['webhook-id']);
    expect(new Set(requests.map((request) => request.headers['webhook-id'])).size).toBe(4);
  });

  it('creates, reads, lists and deletes a config of a running task: it hears the task as it stands, then its cancel', async () => {
    grynya.faults.hang = true;
    try {
      const task = await sendWithPush('Self-check, please', undefined);
      await expect.poll(async () => (await client.getTask({ tenant: '', id: task.id })).status?.state, { timeout: 15_000 }).toBe(TaskState.TASK_STATE_WORKING);
      const created = await client.createTaskPushNotificationConfig(
        pushConfig(`${receiver.origin}/hooks/later`, { taskId: task.id, id: 'later', token: 'a-token-for-this-task' }),
      );
      expect(created).toMatchObject({ id: 'later', taskId: task.id, url: `${receiver.origin}/hooks/later`, token: 'a-token-for-this-task' });
      expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'later' })).toEqual(created);
      expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs).toEqual([created]);
      await expect
        .poll(() => receiver.to('/hooks/later').map(eventOf), { timeout: 10_000 })
        .toEqual([{ case: 'task', state: TaskState.TASK_STATE_WORKING, taskId: task.id }]);
      expect(receiver.to('/hooks/later')[0]?.headers).toMatchObject({
        authorization: `Bearer ${RECEIVER_SECRET}`,
        'x-a2a-notification-token': 'a-token-for-this-task',
      });

      await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
      await expect
        .poll(() => receiver.to('/hooks/later').map(eventOf).at(-1), { timeout: 10_000 })
        .toEqual({ case: 'statusUpdate', state: TaskState.TASK_STATE_CANCELED, taskId: task.id });

      await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'later' });
      await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'later' });
      expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs).toEqual([]);
      await expect(client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'later' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    } finally {
      grynya.faults.hang = false;
    }
  });

  it('refuses a URL the allow-list does not admit, loopback ones not listed included, with -32003, and stays up', async () => {
    const { id } = await sendWithPush('Self-check, please', undefined);
    const refusals = [
      ['https://hooks.example.net/a2a', 'matches no entry of a2a.pushAllow'],
      [`${receiver.origin}/elsewhere`, 'matches no entry of a2a.pushAllow'],
      [`${receiver.origin.replace('127.0.0.1', 'localhost')}/hooks/x`, 'matches no entry of a2a.pushAllow'],
      [`http://127.0.0.1:${new URL(url).port}/hooks`, 'matches no entry of a2a.pushAllow'],
      ['http://169.254.169.254/latest/meta-data', 'matches no entry of a2a.pushAllow'],
      ['ftp://hooks.example.net/a2a', 'must be http(s)'],
    ] as const;
    const answers = await Promise.all(
      refusals.map(([target]) => client.createTaskPushNotificationConfig(pushConfig(target, { taskId: id })).catch((error: unknown) => error)),
    );
    expect(answers).toEqual(
      refusals.map(([, why]) => expect.objectContaining({ name: 'PushNotificationNotSupportedError', message: expect.stringContaining(why) })),
    );
    expect(await rpc('CreateTaskPushNotificationConfig', { taskId: id, url: 'http://127.0.0.1:9/x' })).toMatchObject({
      error: { code: -32003, message: expect.stringContaining('a2a.pushAllow') },
    });
    // A send whose config is refused starts no task.
    const before = (
      await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined })
    ).totalSize;
    await expect(sendWithPush('Self-check, please', pushConfig('http://169.254.169.254/'))).rejects.toMatchObject({
      name: 'PushNotificationNotSupportedError',
    });
    expect(
      (await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined }))
        .totalSize,
    ).toBe(before);
    expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId: id, pageSize: 0, pageToken: '' })).configs).toEqual([]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await client.getTask({ tenant: '', id })).id).toBe(id);
  });
});

describe('A2A push notifications off (no a2a.pushAllow)', () => {
  it('says pushNotifications: false in its card and answers every push method, and a send with a config, with -32003', async () => {
    const harness = await startHarness({ auth: { tokens: { grynya: TOKEN } } });
    cleanups.push(() => harness.cleanup());
    const off = await a2aClient(harness.server.url, TOKEN);
    expect((await off.getAgentCard()).capabilities?.pushNotifications).toBe(false);
    const call = async (method: string, params: unknown) => {
      const response = await fetch(`${harness.server.url}/a2a`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, [A2A_VERSION_HEADER]: '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method, params }),
      });
      return response.json();
    };
    const calls = [
      ['CreateTaskPushNotificationConfig', { taskId: 't', url: 'https://hooks.example.com/' }],
      ['GetTaskPushNotificationConfig', { taskId: 't', id: 'c' }],
      ['ListTaskPushNotificationConfigs', { taskId: 't' }],
      ['DeleteTaskPushNotificationConfig', { taskId: 't', id: 'c' }],
      [
        'SendMessage',
        {
          message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'Self-check, please' }] },
          configuration: { taskPushNotificationConfig: { url: 'https://hooks.example.com/' } },
        },
      ],
    ] as const;
    const answers = await Promise.all(calls.map(([method, params]) => call(method, params)));
    expect(answers).toEqual(
      calls.map(() => expect.objectContaining({ id: 9, error: expect.objectContaining({ code: -32003, message: expect.stringContaining('a2a.pushAllow') }) })),
    );
    expect(
      (await off.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined })).tasks,
    ).toEqual([]);
  });
});
