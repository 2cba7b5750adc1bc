/**
 * The task store in Redis, shared by any number of Klym processes (issue #13: fronts and workers on one
 * Redis). A subpath of its own so that ioredis is loaded only by those who use it.
 *
 * @example
 * ```ts
 * import { createTaskManager } from '@klym/core';
 * import { createRedisTaskStore } from '@klym/core/redis';
 *
 * const store = await createRedisTaskStore({ url: 'redis://:secret@localhost:6379/0' });
 * for (const warning of store.warnings) console.warn(`Redis ${store.where}: ${warning}`);
 * const manager = createTaskManager({ store, ... });
 * ```
 * @module
 */
export { createRedisTaskStore, type RedisTaskStore, type RedisTaskStoreOptions } from './tasks/redis/redis-task-store.ts';
