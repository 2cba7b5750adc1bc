import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { describeTaskStoreContract } from '../../../../../test/support/task-store-contract.ts';
import { artifactOf, checkpointOf, taskRecord, userMessage } from '../../../../../test/support/task-fixtures.ts';
import { ARTIFACT_DEFAULTS } from '../../defaults.ts';
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

  it("keeps at most a quarter of the heap's limit of artifacts unless told, and checks its caps", async () => {
    const store = createMemoryTaskStore({ artifacts: { maxBytesPerTask: Number.MAX_SAFE_INTEGER } });
    await store.insert(taskRecord('t1', { status: 'running' }));
    const cap = Math.min(Math.floor(getHeapStatistics().heap_size_limit / 4), ARTIFACT_DEFAULTS.maxBytes);
    // Counted, not allocated: a store trusts an artifact's `bytes`.
    await expect(store.saveArtifact('t1', artifactOf('art_00000000000a', 'x', { bytes: cap + 1 }))).rejects.toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message: expect.stringContaining(`would pass the task store's ${cap} bytes of artifacts (0 kept`),
    });
    await store.saveArtifact('t1', artifactOf('art_00000000000b', 'x', { bytes: cap }));
    expect(await store.artifactBytes()).toBe(cap);
    expect(() => createMemoryTaskStore({ artifacts: { maxBytes: 0 } })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: 'Expected `artifacts.maxBytes` to be a positive integer, got 0' }),
    );
  });
});
