/**
 * Klym on Redis, shared by any number of processes (issue #13: fronts and workers on one Redis): the task
 * store, and the task queue on BullMQ. A subpath of its own so that ioredis and BullMQ are loaded only by
 * those who use them.
 *
 * @example
 * ```ts
 * import { createTaskManager } from '@klym/core';
 * import { createBullmqTaskQueue, createRedisTaskStore } from '@klym/core/redis';
 *
 * const store = await createRedisTaskStore({ url: 'redis://:secret@localhost:6379/0' });
 * for (const warning of store.warnings) console.warn(`Redis ${store.where}: ${warning}`);
 * const queue = await createBullmqTaskQueue({ url: 'redis://:secret@localhost:6379/0' });
 * const manager = createTaskManager({ store, queue, maxConcurrent: 4, ... }); // maxConcurrent: 0 for a front only
 * ```
 * @module
 */
export { createRedisTaskStore, type RedisTaskStore, type RedisTaskStoreOptions } from './tasks/store/redis/redis-task-store.ts';
export { createBullmqTaskQueue, type BullmqTaskQueue, type BullmqTaskQueueOptions } from './tasks/queue/index.ts';
