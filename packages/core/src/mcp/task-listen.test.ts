import { describe, expect, it } from 'vitest';
import { KlymError } from '../errors.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { serveTaskListen } from './task-listen.ts';

const listen = {
  jsonrpc: '2.0' as const,
  id: 'sub-1',
  method: 'subscriptions/listen',
  params: {
    notifications: { taskIds: ['t1'] },
    _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
  },
};
const options = {
  principal: 'alice',
  pollIntervalMs: 1_000,
  keepAliveMs: 60_000,
  signal: new AbortController().signal,
  open: new Set<() => void>(),
  serverInfo: { name: 'klym', version: '0' },
};

/** A task service whose store answers every read with `error`. */
const serviceFailing = (error: Error): TaskService => ({ tasks: { get: () => Promise.reject(error) }, onEvent: () => () => {} }) as unknown as TaskService;

describe('serveTaskListen', () => {
  it('answers a store that cannot be read with the JSON-RPC error naming it, not an empty acknowledgement', async () => {
    const response = await serveTaskListen(
      serviceFailing(new KlymError('STORE_UNAVAILABLE', 'Redis task store at 127.0.0.1:6379/0 is unreachable')),
      listen,
      options,
    );
    expect(response.headers.get('content-type')).toMatch(/json/);
    expect(await response.json()).toMatchObject({
      id: 'sub-1',
      error: { code: -32603, message: expect.stringMatching(/^STORE_UNAVAILABLE: /), data: { code: 'STORE_UNAVAILABLE' } },
    });
  });

  it('leaves out a task the caller cannot see, and ends the stream at once when none is left', async () => {
    const response = await serveTaskListen(serviceFailing(new KlymError('TASK_NOT_FOUND', 'No task "t1"')), listen, options);
    const text = await response.text();
    expect(text).toContain('"notifications":{"taskIds":[]}');
    expect(text).toContain('"result":{"resultType":"complete"');
  });
});
