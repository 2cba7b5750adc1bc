// Scenario 5c (issue #12): what Grynya's poll waits for while other requests pour into the front. The 16
// callers of scenario 5 start tasks as fast as they are answered; then, with the runner still saturated by
// those tasks, they send `ping`s — the cheapest MCP request, no task, none of Klym's tools — paced at the
// rate the starts were answered, for as long; then only the runs go on. Grynya's stand-in polls
// `check_task_status` every 20 ms throughout, and between its polls a trivial endpoint on an idle thread of
// Klym's process: the floor of a round trip on the machine's cores at that moment.
import type { ChildServer } from './servers.ts';
import { client, scenarioFiveOptions, startKlymChild, startAsFastAsAnswered, startStatusPoller, waitUntilIdle, within } from './klym-server.ts';
import { figure, ms } from './stats.ts';

const now = (): number => performance.timeOrigin + performance.now();

export async function frontBurst(grynya: ChildServer, tasks: number): Promise<string[]> {
  const klym = await startKlymChild(scenarioFiveOptions(grynya, 50));
  const callers = await client(klym.mcpUrl);
  try {
    await Promise.all(Array.from({ length: 50 }, () => callers.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'warm-up' } })));
    await waitUntilIdle(klym);
    for (let index = 0; index < 500; index++) await callers.ping();

    const poller = await startStatusPoller(klym.mcpUrl, klym.floorUrl);
    const startsBegan = now();
    await startAsFastAsAnswered(callers, tasks, poller);
    const pingsBegan = now();
    // The n-th ping is due n intervals after the first, whichever caller is free to send it.
    const interval = (pingsBegan - startsBegan) / tasks;
    let pings = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (pings < tasks) {
          const due = pingsBegan + pings++ * interval;
          if (due > now()) await new Promise((resolve) => setTimeout(resolve, due - now()));
          await callers.ping();
        }
      }),
    );
    const runsOnly = now();
    await waitUntilIdle(klym);
    const ended = now();
    const { floor, ...polls } = await poller.stop();
    const phases = [
      ['16 callers start tasks as fast as they are answered', startsBegan, pingsBegan],
      ['16 callers send pings at the same rate, the runner still saturated', pingsBegan, runsOnly],
      ['the runs only', runsOnly, ended],
    ] as const;
    const rows = phases.map(([label, from, to]) => ({ label, seconds: (to - from) / 1000, status: within(polls, from, to), floor: within(floor, from, to) }));
    const [starts, pinged, runs] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]];
    return [
      `${tasks} tasks, 50 running at a time. Polls every 20 ms; between them, the floor: a trivial HTTP endpoint on an idle thread of Klym's process.`,
      '',
      '| while | time | check_task_status p50 / p99 | floor p50 / p99 |',
      '| --- | --- | --- | --- |',
      ...rows.map(
        (row) =>
          `| ${row.label} | ${row.seconds.toFixed(2)} s | ${ms(row.status.median)} / ${ms(row.status.p99)} (${row.status.count}) | ${ms(row.floor.median)} / ${ms(row.floor.p99)} (${row.floor.count}) |`,
      ),
      '',
      figure('status_p99_burst_starts_ms', starts.status.p99),
      figure('status_p99_burst_pings_ms', pinged.status.p99),
      figure('status_p99_burst_runs_only_ms', runs.status.p99),
      figure('floor_p99_burst_starts_ms', starts.floor.p99),
      figure('floor_p99_burst_pings_ms', pinged.floor.p99),
      figure('floor_p99_burst_runs_only_ms', runs.floor.p99),
      // A poll's p99 over the floor's: among starts, and among pings at the same rate (a front that runs none of
      // Klym's code per request): what the request rate costs a poll on this stack, starts or not.
      figure('status_floor_ratio_burst_starts', starts.status.p99 / starts.floor.p99),
      figure('status_floor_ratio_burst_pings', pinged.status.p99 / pinged.floor.p99),
    ];
  } finally {
    await callers.close();
    await klym.stop();
  }
}
