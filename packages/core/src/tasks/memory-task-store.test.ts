import { describe, expect, it } from 'vitest';
import { checkpointOf, describeTaskStoreContract, taskRecord, userMessage } from '../../../../test/support/task-store-contract.ts';
import { createMemoryTaskStore } from './memory-task-store.ts';

describeTaskStoreContract('createMemoryTaskStore', { open: async (options) => createMemoryTaskStore(options) });

describe('createMemoryTaskStore', () => {
  it('lets a task’s checkpoint go when the task finishes, and keeps it while the task runs', async () => {
    const store = createMemoryTaskStore();
    await store.insert(taskRecord('t1', { status: 'running' }));
    store.saveCheckpoint('t1', checkpointOf([userMessage('hi')]));
    await store.update('t1', { currentStep: 'step 2' });
    expect(await store.loadCheckpoint('t1')).toEqual(checkpointOf([userMessage('hi')]));
    await store.transition('t1', ['running'], { status: 'completed', finishedAt: new Date().toISOString() });
    expect(await store.loadCheckpoint('t1')).toBeUndefined();
  });
});
