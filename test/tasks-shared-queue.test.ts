// Many Klym processes on one BullMQ queue, played in this process over a real redis-server.
import { createMemoryTaskStore } from '@klym/core';
import { describeSharedQueue } from './support/shared-queue-suite.ts';

// Until the Redis store is there, every process of a test shares one memory store object.
describeSharedQueue('one memory store, shared', () => {
  const store = createMemoryTaskStore();
  return async () => store;
});
