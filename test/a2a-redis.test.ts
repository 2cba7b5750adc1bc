// Issue #32 on fronts and workers: an A2A stream on a front follows a task a worker runs, through the shared store.
import { TaskState } from '@a2a-js/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { a2aClient, textMessage } from './support/a2a-client.ts';
import { startRedisServer } from './support/redis-server.ts';
import { OWNER, startScaleOut } from './support/scale-out.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup().catch(() => {});
});

const message = textMessage;

describe('A2A on a front whose tasks run on a worker (Redis)', () => {
  it('streams the Task first, then the end of the run on the worker, and closes', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    const fleet = await startScaleOut({ redis });
    cleanups.push(() => fleet.close());
    const front = await fleet.front();
    await fleet.worker();
    const client = await a2aClient(front.url, OWNER);

    const stream = client.sendMessageStream({ tenant: '', message: message('Take your time: slow-1'), configuration: undefined, metadata: undefined })[Symbol.asyncIterator]();
    const first = (await stream.next()).value;
    expect(first?.payload).toMatchObject({ $case: 'task', value: { status: { state: expect.toBeOneOf([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]) } } });
    const id = first?.payload?.$case === 'task' ? first.payload.value.id : '';
    fleet.releaseSlow();
    const rest = [];
    for (let next = await stream.next(); next.done !== true; next = await stream.next()) rest.push(next.value.payload);
    expect(rest.find((event) => event?.$case === 'artifactUpdate')).toMatchObject({ value: { taskId: id, artifact: { artifactId: 'result', parts: [{ content: { $case: 'text', value: 'Done: slow-1.' } }] } } });
    expect(rest.at(-1)).toMatchObject({ $case: 'statusUpdate', value: { taskId: id, status: { state: TaskState.TASK_STATE_COMPLETED } } });
    expect((await front.api(`/api/tasks/${id}`)).json).toMatchObject({ task_id: id, status: 'completed' });
  });
});
