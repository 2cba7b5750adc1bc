// Scenario 2 (issue #3): a task's start to its first upstream tool result, with the pool's open
// session against the design Klym replaces — a fresh connection per task (connect, initialize,
// tools/list, call, close) — over legacy SSE to the fake grynya in its own process, side by side.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createSessionPool } from '@klym/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { startFakeGrynyaProcess } from './servers.ts';
import { figure, ms, ratio, sideBySide } from './stats.ts';

export async function freshVsPooled(options: { rounds: number; perRound: number }): Promise<string[]> {
  const grynya = await startFakeGrynyaProcess();
  try {
    await using pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } } });
    await pool.warmedUp();
    const args = { query: 'RETURN 1' };
    const pooledTask = async (): Promise<void> => {
      await pool.listTools(); // cached: the task needs the tool list, the pool already has it
      await pool.callTool('grynya', 'query_graph', args);
    };
    const freshTask = async (): Promise<void> => {
      const client = new Client({ name: 'fresh-per-task', version: '1.0.0' });
      await client.connect(new SSEClientTransport(new URL(grynya.sseUrl)));
      await client.listTools();
      await client.callTool({ name: 'query_graph', arguments: args });
      await client.close();
    };

    // HTTP requests each design makes per task, counted where Node's and undici's fetch both report them.
    const requests = { count: 0 };
    const onRequest = (): void => void requests.count++;
    subscribe('undici:request:create', onRequest);
    const perTask = async (task: () => Promise<void>): Promise<number> => {
      requests.count = 0;
      for (let index = 0; index < 10; index++) await task();
      return requests.count / 10;
    };
    const pooledRequests = await perTask(pooledTask);
    const freshRequests = await perTask(freshTask);
    unsubscribe('undici:request:create', onRequest);

    await sideBySide(1, 20, { a: pooledTask, b: freshTask });
    const { a, b } = await sideBySide(options.rounds, options.perRound, { a: pooledTask, b: freshTask });
    return [
      '| design | median | p99 | HTTP requests per task |',
      '| --- | --- | --- | --- |',
      `| pooled session (Klym) | ${ms(a.median)} | ${ms(a.p99)} | ${pooledRequests} |`,
      `| fresh connection per task | ${ms(b.median)} | ${ms(b.p99)} | ${freshRequests} |`,
      '',
      `Fresh ÷ pooled: ${ratio(b.median / a.median)} at the median, ${ratio(b.p99 / a.p99)} at p99; ${freshRequests - pooledRequests} HTTP round trips saved per task.`,
      figure('fresh_vs_pooled_ratio', b.median / a.median),
    ];
  } finally {
    await grynya.stop();
  }
}
