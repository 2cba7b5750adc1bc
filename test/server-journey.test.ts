import { afterEach, describe, expect, it } from 'vitest';
import { KLYM_TOOLS, payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';
import { freePort } from './support/upstream-servers.ts';

/** What the scripted model's self-check reports when every upstream works. */
const ALL_WELL = 'Бачу базу та інструменти, полет нормальний';

let harness: ServerHarness | undefined;
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
});

for (const kind of ['streamable-http', 'sse'] as const) {
  describe(`Grynya's journey over ${kind}, with the official SDK client`, () => {
    it('starts a task, gets its id at once, polls it to completion and finds the write-back node in the graph', async () => {
      harness = await startHarness();
      const client = await harness.connect(kind);
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name).toSorted()).toEqual([...KLYM_TOOLS]);

      const before = performance.now();
      const started = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'Self-check, please', record_result: true } }));
      expect(performance.now() - before).toBeLessThan(1_000);
      expect(started).toMatchObject({ task_id: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/), status: expect.stringMatching(/^(pending|running)$/) });

      const taskId = String(started.task_id);
      const done = await waitForEnd(client, taskId);
      expect(done).toMatchObject({ status: 'completed', finish_reason: 'stop', model: 'scripted' });
      expect(String(done.result)).toMatch(new RegExp(`^${ALL_WELL}`, 'm'));
      await expect
        .poll(async () => payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).write_back)
        .toEqual({ status: 'written', node_id: `klym_${taskId}` });

      const node = harness.grynya.graph.nodes.get(`klym_${taskId}`);
      expect(node?.label).toBe('Analysis');
      expect(node?.properties).toMatchObject({
        full_text: expect.stringMatching(new RegExp(`^${ALL_WELL}`, 'm')),
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      const day = `d_${new Date().toISOString().slice(0, 10).replaceAll('-', '_')}`;
      expect(harness.grynya.graph.relations).toContainEqual(expect.objectContaining({ type: 'HAPPENED_AT', from: `klym_${taskId}`, to: day }));

      const listed = payload(await client.callTool({ name: 'list_agent_tasks', arguments: {} }));
      expect(listed).toMatchObject({ total: 1, tasks: [{ task_id: taskId, status: 'completed' }] });
    });

    it('cancels a task stuck in a hanging upstream call long before the call would time out, and the upstream sees it', async () => {
      harness = await startHarness();
      harness.grynya.faults.hang = true;
      const client = await harness.connect(kind);
      const { task_id: taskId } = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'hang' } }));
      await expect.poll(() => harness!.grynya.stats.calls.query_graph ?? 0).toBe(1);

      const before = performance.now();
      const cancelled = payload(await client.callTool({ name: 'cancel_agent_task', arguments: { task_id: taskId } }));
      expect(cancelled).toMatchObject({ cancelled: true, status: 'cancelled' });
      expect(performance.now() - before).toBeLessThan(2_000);
      await expect.poll(() => harness!.grynya.stats.cancelled).toBeGreaterThanOrEqual(1);

      const again = payload(await client.callTool({ name: 'cancel_agent_task', arguments: { task_id: taskId } }));
      expect(again).toMatchObject({ cancelled: false, status: 'cancelled', message: expect.stringMatching(/already ended as cancelled; nothing changed/) });
    });

    it('keeps serving other tasks while one fails', async () => {
      // A configured model whose provider is down: the task fails with MODEL_ERROR.
      // Free a moment ago, so nothing listens: connections are refused.
      const down = `http://127.0.0.1:${await freePort()}/v1`;
      harness = await startHarness({ tasks: { models: ['scripted', 'compatible:down'], providers: { compatible: { baseURL: down } }, maxRetries: 0 } });
      const client = await harness.connect(kind);
      const failing = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'hello', model: 'compatible:down' } }));
      const fine = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } }));
      expect(await waitForEnd(client, String(failing.task_id))).toMatchObject({ status: 'error', error: { code: 'MODEL_ERROR' } });
      expect(await waitForEnd(client, String(fine.task_id))).toMatchObject({
        status: 'completed',
        result: expect.stringMatching(new RegExp(`^${ALL_WELL}`, 'm')),
      });
    });
  });
}

describe('bearer auth with the official client', () => {
  it('lets a client with a valid token in over both transports, and keeps one without it out', async () => {
    harness = await startHarness({ auth: { tokens: { grynya: 'the-token-of-grynya-123456' } } });
    for (const kind of ['streamable-http', 'sse'] as const) {
      const client = await harness.connect(kind, 'the-token-of-grynya-123456');
      expect((await client.listTools()).tools).toHaveLength(9);
      await expect(harness.connect(kind)).rejects.toThrow(/401|Unauthorized/i);
      await expect(harness.connect(kind, 'a-wrong-token')).rejects.toThrow(/401|Unauthorized/i);
    }
  });
});
