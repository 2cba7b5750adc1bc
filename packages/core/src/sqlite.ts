/**
 * The durable task store, on Node's built-in `node:sqlite` (Node 22.13+ without a flag; Node 24 is what
 * Klym runs on). A subpath of its own so that `node:sqlite` is loaded only by those who use it.
 *
 * @example
 * ```ts
 * import { createTaskManager } from '@klym/core';
 * import { createSqliteTaskStore } from '@klym/core/sqlite';
 *
 * const store = await createSqliteTaskStore({ path: './data/tasks.db' });
 * const manager = createTaskManager({ store, ... });
 * ```
 * @module
 */
export { createSqliteTaskStore, type SqliteTaskStoreOptions } from './tasks/store/sqlite/sqlite-task-store.ts';
export { TASK_STORE_SCHEMA_VERSION } from './tasks/store/sqlite/schema.ts';
