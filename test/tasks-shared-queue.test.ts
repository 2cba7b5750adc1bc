// Many Klym processes on one BullMQ queue, played in this process over a real redis-server: the same
// suite on one memory store object every "process" shares, and on a Redis store per process.
import { createMemoryTaskStore } from '@klym/core';
import { createRedisTaskStore } from '@klym/core/redis';
import { describeSharedQueue } from './support/shared-queue-suite.ts';

describeSharedQueue('one memory store, shared', () => {
  const store = createMemoryTaskStore();
  return async () => store;
});

// Each process opens its own store on the Redis the queue uses, as fronts and workers on many machines do.
// A prefix per test: what one test's tasks leave in Redis is not another's.
let test = 0;
describeSharedQueue('a Redis store per process', () => {
  const prefix = `klym-test-${++test}:`;
  return async (url) => createRedisTaskStore({ url, prefix });
});
