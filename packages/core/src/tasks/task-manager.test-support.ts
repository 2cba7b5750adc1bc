// What tests of a task manager share: a manager over a scripted model, closed after the test, and waiting for a status.
import { expect, vi } from 'vitest';
import { runAgent } from '../agent/run-agent.ts';
import type { createScriptedModel } from '../agent/scripted-model.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import { createTaskManager } from './task-manager.ts';
import type { AgentRunner, Caller, TaskManager, TaskManagerOptions } from './task-manager-types.ts';
import type { TaskRecord } from './store/task-types.ts';

/** A manager whose runs use `model`; `cleanups` gets its close. */
export function openManager(
  cleanups: (() => Promise<unknown> | void)[],
  pool: SessionPool,
  model: ReturnType<typeof createScriptedModel>,
  options: Partial<TaskManagerOptions> = {},
): TaskManager {
  const run: AgentRunner = (runOptions) => runAgent({ ...runOptions, model });
  const manager = createTaskManager({ pool, run, ...options });
  cleanups.push(() => manager.close({ graceMs: 0 }));
  return manager;
}

/** The task once `caller` sees it in `status` (ten seconds at most). */
export const waitForStatus = (manager: TaskManager, caller: Caller, id: string, status: TaskRecord['status']): Promise<TaskRecord> =>
  vi.waitFor(
    async () => {
      const task = await manager.get(id, caller);
      expect(task.status).toBe(status);
      return task;
    },
    { timeout: 10_000 },
  );
