import { describeTaskStoreContract } from '../../../../test/support/task-store-contract.ts';
import { createMemoryTaskStore } from './memory-task-store.ts';

describeTaskStoreContract('createMemoryTaskStore', { open: async (options) => createMemoryTaskStore(options) });
