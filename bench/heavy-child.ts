// Scenario 10's Klym (issue #27), in a process of its own so that its peak RSS is the task's: one run that
// reads a big log through @modelcontextprotocol/server-filesystem over stdio (kept as an artifact), maps it
// with klym__map_artifact against the parent's fake model, then greps the artifact once more on its own.
// `heavy-child.ts <dir> <file> <openai base URL> <context window>`; prints one JSON line.
import { createRequire } from 'node:module';
import path from 'node:path';
import { createArtifactStore, createSessionPool, runAgent, type AgentEvent } from '@klym/core';

const [directory = '', file = '', baseURL = '', windowText = ''] = process.argv.slice(2);
const server = { command: process.execPath, args: [createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js'), directory] };
const pool = await createSessionPool({ upstreams: { files: { ...server, maxMessageBytes: 256 * 2 ** 20 } } });
await pool.warmedUp();

globalThis.gc?.();
const rssBefore = process.memoryUsage().rss;
const events: AgentEvent[] = [];
const started = performance.now();
const result = await runAgent({
  pool,
  prompt: `How many ERROR lines per service are in ${path.join(directory, file)}?`,
  model: 'openai:gpt-4.1-mini',
  providers: { openai: { apiKey: 'sk-bench-key-for-the-fake-000000', baseURL } },
  contextWindows: { 'openai:gpt-4.1-mini': Number(windowText) },
  budget: { maxSteps: 20 },
  onEvent: (event) => void events.push(event),
});
const runMs = performance.now() - started;
// The kernel's peak: sampling from a timer would miss what a synchronous parse holds.
const peakGrowthMiB = (process.resourceUsage().maxRSS * 1024 - rssBefore) / 2 ** 20;
const kept = events.find((event) => event.type === 'artifact-kept');
const map = events.find((event) => event.type === 'artifact-map');
const mapCall = events.find((event) => event.type === 'tool-result' && event.toolName === 'klym__map_artifact');

// A grep over the same text, alone: the artifact store's own cost, from a text already in memory.
const read = await pool.callTool('files', 'read_text_file', { path: path.join(directory, file) });
const text = (read.content[0] as { text: string }).text;
const artifacts = createArtifactStore();
const { id } = await artifacts.put('files__read_text_file', text);
await artifacts.grep(id, 'warm-up-no-match');
const grepStarted = performance.now();
const found = await artifacts.grep(id, 'svc-7 ERROR .*code=5\\d2');
const grepMs = performance.now() - grepStarted;

console.log(
  JSON.stringify({
    runMs,
    peakGrowthMiB,
    artifactBytes: kept?.type === 'artifact-kept' ? kept.artifact.bytes : 0,
    chunks: map?.type === 'artifact-map' ? map.chunks : 0,
    mapInputTokens: map?.type === 'artifact-map' ? map.usage.inputTokens : 0,
    mapMs: mapCall?.type === 'tool-result' ? mapCall.durationMs : 0,
    grepMs,
    grepMatches: found.total,
    answer: result.text,
  }),
);
await pool.close();
