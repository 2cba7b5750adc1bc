// Issue #32 on fronts and workers: an A2A stream on a front follows a task a worker runs, through the shared store.
import { StreamResponse, TaskState, type Task } from '@a2a-js/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { a2aClient, textMessage } from './support/a2a-client.ts';
import { startPushReceiver, type PushRequest } from './support/push-receiver.ts';
import { startRedisServer } from './support/redis-server.ts';
import { OWNER, startScaleOut } from './support/scale-out.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

const message = textMessage;

/** A push body as the SDK reads a stream event: its case, and the state it tells of. */
function eventOf(request: PushRequest): unknown[] {
  const { payload } = StreamResponse.fromJSON(request.json);
  if (payload?.$case === 'task' || payload?.$case === 'statusUpdate') return [payload.$case, payload.value.status?.state];
  return [payload?.$case];
}

describe('A2A on a front whose tasks run on a worker (Redis)', () => {
  it('streams the Task first, then the end of the run on the worker, and closes', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    const fleet = await startScaleOut({ redis });
    cleanups.push(() => fleet.close());
    const front = await fleet.front();
    await fleet.worker();
    const client = await a2aClient(front.url, OWNER);

    const events = client.sendMessageStream({ tenant: '', message: message('Take your time: slow-1'), configuration: undefined, metadata: undefined });
    const stream = events[Symbol.asyncIterator]();
    const first = (await stream.next()).value;
    expect(first?.payload).toMatchObject({
      $case: 'task',
      value: { status: { state: expect.toBeOneOf([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]) } },
    });
    const id = first?.payload?.$case === 'task' ? first.payload.value.id : '';
    fleet.releaseSlow();
    const rest = [];
    for (let next = await stream.next(); next.done !== true; next = await stream.next()) rest.push(next.value.payload);
    expect(rest.find((event) => event?.$case === 'artifactUpdate')).toMatchObject({
      value: { taskId: id, artifact: { artifactId: 'result', parts: [{ content: { $case: 'text', value: 'Done: slow-1.' } }] } },
    });
    expect(rest.at(-1)).toMatchObject({ $case: 'statusUpdate', value: { taskId: id, status: { state: TaskState.TASK_STATE_COMPLETED } } });
    expect((await front.api(`/api/tasks/${id}`)).json).toMatchObject({ task_id: id, status: 'completed' });
  }, 60_000);

  // Three processes (a front, a worker, Redis) start here: on a loaded machine, more than the default 20 s.
  it('delivers the push notifications of a task a worker runs, from a config given on the front, in order after a 500', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    // The first request (the front's SUBMITTED) is answered 500: the worker's later ones must wait for its retry.
    const receiver = await startPushReceiver((_request, index) => (index === 0 ? 500 : 200));
    cleanups.push(() => receiver.close());
    const fleet = await startScaleOut({ redis });
    cleanups.push(() => fleet.close());
    const push = [
      '--set',
      `a2a.pushAllow=${receiver.origin}/hooks`,
      '--set',
      'a2a.pushDelivery.retryDelayMs=50',
      '--set',
      'a2a.pushDelivery.maxRetryDelayMs=200',
    ];
    const front = await fleet.front(push);
    await fleet.worker(push);
    const client = await a2aClient(front.url, OWNER);

    const target = {
      tenant: '',
      id: 'fleet',
      taskId: '',
      url: `${receiver.origin}/hooks/fleet`,
      token: '',
      authentication: { scheme: 'Bearer', credentials: 'fleet-receiver-credentials' },
    };
    const task = (await client.sendMessage({
      tenant: '',
      message: message('Take your time: slow-2'),
      configuration: { acceptedOutputModes: [], taskPushNotificationConfig: target, returnImmediately: true },
      metadata: undefined,
    })) as Task;
    await expect.poll(() => receiver.requests.length, { timeout: 15_000 }).toBeGreaterThanOrEqual(3);
    fleet.releaseSlow();
    await expect.poll(() => receiver.requests.map(eventOf).at(-1), { timeout: 15_000 }).toEqual(['statusUpdate', TaskState.TASK_STATE_COMPLETED]);
    expect(receiver.requests.map(eventOf)).toEqual([
      ['task', TaskState.TASK_STATE_SUBMITTED],
      ['task', TaskState.TASK_STATE_SUBMITTED],
      ['statusUpdate', TaskState.TASK_STATE_WORKING],
      ['artifactUpdate'],
      ['statusUpdate', TaskState.TASK_STATE_COMPLETED],
    ]);
    expect(receiver.requests.every((request) => request.headers.authorization === 'Bearer fleet-receiver-credentials' && request.path === '/hooks/fleet')).toBe(
      true,
    );
    expect((await front.api(`/api/tasks/${task.id}`)).json).toMatchObject({ task_id: task.id, status: 'completed' });
  }, 60_000);
});
