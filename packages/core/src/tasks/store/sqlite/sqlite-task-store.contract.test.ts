import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { describeTaskStoreContract } from '../../../../../../test/support/task-store-contract.ts';
import { createSqliteTaskStore } from './sqlite-task-store.ts';

let dir: string;
let opened = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'klym-sqlite-contract-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describeTaskStoreContract('createSqliteTaskStore', { open: (options) => createSqliteTaskStore({ ...options, path: join(dir, `tasks-${++opened}.db`) }) });
