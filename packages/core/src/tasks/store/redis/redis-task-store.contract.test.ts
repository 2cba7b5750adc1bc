import { afterAll, beforeAll } from 'vitest';
import { startRedisServer, type RedisServer } from '../../../../../../test/support/redis-server.ts';
import { describeTaskStoreContract } from '../../../../../../test/support/task-store-contract.ts';
import { createRedisTaskStore } from './redis-task-store.ts';

let redis: RedisServer;
let opened = 0;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.close();
});

// One server for the file; each store a prefix of its own, so each starts empty.
describeTaskStoreContract('createRedisTaskStore', { open: (options) => createRedisTaskStore({ ...options, url: redis.url, prefix: `contract-${++opened}:` }) });
