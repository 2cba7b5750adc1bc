import { ProgressNotificationSchema, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { scriptedRunner, streamTool, textOf } from './support/mcp-tasks.ts';
import { payload, startHarness, waitForEnd, type ServerHarness } from './support/server-harness.ts';

let harness: ServerHarness | undefined;
afterEach(async () => {
  await harness?.cleanup();
  harness = undefined;
});

/** A progress notification and when it arrived. */
type Received = Progress & { readonly at: number };

/**
 * What every report of a task of 8 tool steps and an answer step, each step ~150 ms, must look like: the
 * steps done only ever grow, up to all 9; the total is the step budget; the message names the tool and
 * the tokens; and steps done within a second are told as one, so notifications are never closer than a
 * second apart (a margin below it for the trip to the client).
 */
function expectCoalescedReports(received: readonly Received[]): void {
  expect(received.length).toBeGreaterThanOrEqual(2);
  const progress = received.map((report) => report.progress);
  expect(progress).toEqual(progress.toSorted((a, b) => a - b));
  expect(new Set(progress).size).toBe(progress.length);
  expect(progress.at(-1)).toBe(9);
  for (const report of received) {
    expect(report.total).toBe(12);
    expect(report.message).toMatch(new RegExp(`^step ${report.progress} of 12 done: .*; [\\d,]+ tokens so far$`));
  }
  expect(received[0]?.message).toMatch(/grynya__query_graph ×\d/);
  const gaps = received.slice(1).map((report, index) => report.at - (received[index]?.at ?? 0));
  expect(Math.min(...gaps)).toBeGreaterThan(700);
}

for (const kind of ['streamable-http', 'sse'] as const) {
  describe(`progress over ${kind}`, () => {
    it('reports the steps of a run_agent_task with a progress token, at most once a second', async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner } });
      harness.grynya.faults.delayMs = 150;
      const client = await harness.connect(kind);
      const received: Received[] = [];
      const streamed = await streamTool(
        client,
        'run_agent_task',
        { prompt: 'steps:8', budget: { max_steps: 12 } },
        { onprogress: (report) => void received.push({ ...report, at: performance.now() }) },
      );
      expect(textOf(streamed.result)).toBe('done after 8 steps');
      // The final report may follow the end by up to a second.
      await expect.poll(() => received.at(-1)?.progress, { timeout: 3_000 }).toBe(9);
      expectCoalescedReports(received);
    });

    it('reports the steps of a start_async_agent_task whose start carried a progress token', async () => {
      harness = await startHarness({ tasks: { run: scriptedRunner } });
      harness.grynya.faults.delayMs = 150;
      const client = await harness.connect(kind);
      const received: Received[] = [];
      // The start is answered at once; its token's reports come after, so the client takes them as they come.
      client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
        if (notification.params.progressToken === 'start-1') received.push({ ...notification.params, at: performance.now() });
      });
      const started = payload(
        await client.callTool({
          name: 'start_async_agent_task',
          arguments: { prompt: 'steps:8', budget: { max_steps: 12 } },
          _meta: { progressToken: 'start-1' },
        }),
      );
      await waitForEnd(client, String(started.task_id));
      await expect.poll(() => received.at(-1)?.progress, { timeout: 3_000 }).toBe(9);
      expectCoalescedReports(received);
    });
  });
}
