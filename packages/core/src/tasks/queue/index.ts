/**
 * Tasks on a queue that many Klym processes share, on Redis with BullMQ: the exports of
 * `@klym/core/redis` that belong to the queue (the Redis task store is beside them).
 * @module
 */
export { createBullmqTaskQueue, type BullmqTaskQueue, type BullmqTaskQueueOptions } from './bullmq-task-queue.ts';
export type { QueueLogListener } from './queue-log.ts';
