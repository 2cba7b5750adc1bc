// Scenario 10's library run (issues #27, #31), in a process of its own so that its peak RSS is the run's: it reads
// a big log through @modelcontextprotocol/server-filesystem over stdio (kept as an artifact) and answers how many
// ERROR lines each service has, against the parent's fake model, which decides the path (map, or query).
// `heavy-child.ts <dir> <file> <openai base URL> <context window> [max tokens]`; prints one JSON line (`RunFigures`).
import { createRequire } from 'node:module';
import path from 'node:path';
import { createSessionPool, runAgent, type AgentEvent } from '@klym/core';
import { peakGrowthMiB, rssBeforeRun, runFigures, watchGroup } from './heavy-run.ts';

const [directory = '', file = '', baseURL = '', windowText = '', maxTokensText] = process.argv.slice(2);
const server = {
  command: process.execPath,
  args: [createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js'), directory],
};
const pool = await createSessionPool({ upstreams: { files: { ...server, maxMessageBytes: 256 * 2 ** 20 } } });
await pool.warmedUp();

const group = await watchGroup();
const rssBefore = rssBeforeRun();
group.start();
const events: AgentEvent[] = [];
const started = performance.now();
const result = await runAgent({
  pool,
  prompt: `How many ERROR lines per service are in ${path.join(directory, file)}?`,
  model: 'openai:gpt-4.1-mini',
  providers: { openai: { apiKey: 'sk-bench-key-for-the-fake-000000', baseURL } },
  contextWindows: { 'openai:gpt-4.1-mini': Number(windowText) },
  budget: { maxSteps: 20, ...(maxTokensText === undefined ? {} : { maxTokens: Number(maxTokensText) }) },
  onEvent: (event) => void events.push(event),
});
const runMs = performance.now() - started;
const growth = peakGrowthMiB(rssBefore);
const groupPeak = await group.stop(rssBefore);

console.log(
  JSON.stringify(
    runFigures(events, {
      runMs,
      peakGrowthMiB: growth,
      group: groupPeak,
      answer: result.finalText,
      finishReason: result.finishReason,
      totalTokens: result.usage.totalTokens,
    }),
  ),
);
await pool.close();
