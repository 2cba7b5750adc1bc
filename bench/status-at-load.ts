// Scenario 5b (issue #12): what Grynya waits for when Klym is busy but not saturated. Klym's saturated
// task rate is measured first (tasks started as fast as they are taken, 50 running at a time); then tasks
// arrive open-loop at 70% of that rate while Grynya's stand-in polls `check_task_status` every 20 ms from
// a process of its own.
import type { ChildServer } from './servers.ts';
import { client, scenarioFiveOptions, startKlymChild, startStatusPoller, waitUntilIdle } from './klym-server.ts';
import { figure, ms, summarize } from './stats.ts';

const CONCURRENCY = 50;
const LOAD = 0.7;

export async function statusAtLoad(grynya: ChildServer, tasks: number): Promise<string[]> {
  const klym = await startKlymChild(scenarioFiveOptions(grynya, CONCURRENCY));
  const starter = await client(klym.mcpUrl);
  const start = async (): Promise<string> => {
    const answer = await starter.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'self-check' } });
    return String((answer.structuredContent as { task_id?: unknown } | undefined)?.task_id);
  };
  try {
    // Warm-up, then the saturated rate: the same closed loop as scenario 5, 16 callers.
    await Promise.all(Array.from({ length: CONCURRENCY }, start));
    await waitUntilIdle(klym);
    let started = 0;
    const began = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (started < tasks) {
          started++;
          await start();
        }
      }),
    );
    await waitUntilIdle(klym);
    const saturatedRate = tasks / ((performance.now() - began) / 1000);

    // Open loop at 70% of it: a start every 1/rate seconds whatever the answers' pace, polled meanwhile.
    const interval = 1000 / (saturatedRate * LOAD);
    await klym.ask('reset');
    const poller = await startStatusPoller(klym.mcpUrl, klym.floorUrl);
    const loadBegan = performance.now();
    const starts: Promise<void>[] = [];
    for (let index = 0; index < tasks; index++) {
      const due = loadBegan + index * interval;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      starts.push(start().then((id) => poller.poll(id)));
    }
    await Promise.all(starts);
    await waitUntilIdle(klym);
    const polls = await poller.stop();
    const status = summarize(polls.times);
    const floor = summarize(polls.floor.times);
    const stats = await klym.ask<{ delayP99Ms: number }>('stats');
    return [
      `Saturated: ${saturatedRate.toFixed(0)} tasks/s. At ${LOAD * 100}% of it (a start every ${interval.toFixed(1)} ms, ${tasks} tasks, open loop), check_task_status every 20 ms from its own process (${status.count} polls): p50 ${ms(status.median)}, p99 ${ms(status.p99)}; the floor, a trivial endpoint on an idle thread of Klym's process asked between the polls, p99 ${ms(floor.p99)}; Klym's event-loop delay p99 ${ms(stats.delayP99Ms)}.`,
      '',
      figure('status_p50_load70_ms', status.median),
      figure('status_p99_load70_ms', status.p99),
      figure('floor_p99_load70_ms', floor.p99),
    ];
  } finally {
    await starter.close();
    await klym.stop();
  }
}
