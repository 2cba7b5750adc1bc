// Scenario 10 (issue #27): heavy inputs. A task reads a log far bigger than its model's window through
// @modelcontextprotocol/server-filesystem over stdio, and answers an exact aggregate by klym__map_artifact,
// against a local fake of the OpenAI API that plays the agent and answers each chunk after 300 ms.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ARTIFACT_DEFAULTS } from '@klym/core';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { startFakeLlmServer, type FakeReply, type FakeRequest } from '../test/support/fake-llm-server.ts';
import { figure, ratio } from './stats.ts';

const run = promisify(execFile);
const MAP_CALL_MS = 300;
/** The model's window: Klym is configured with it, and the fake refuses a request past it, counted by o200k_base as OpenAI counts. */
const WINDOW = 128_000;

/** `megabytes` MB of log lines: requests, every 97th an ERROR of one of 13 services. */
function logOf(megabytes: number): { readonly text: string; readonly errorsPerService: Map<string, number> } {
  const lines: string[] = [];
  const errorsPerService = new Map<string, number>();
  let size = 0;
  for (let n = 0; size < megabytes * 1e6; n++) {
    const service = `svc-${n % 13}`;
    const error = n % 97 === 96;
    if (error) errorsPerService.set(service, (errorsPerService.get(service) ?? 0) + 1);
    const line = `2026-11-25T03:${String(Math.floor(n / 60_000) % 60).padStart(2, '0')}:${String(Math.floor(n / 1000) % 60).padStart(2, '0')}.${String(n % 1000).padStart(3, '0')}Z ${service} ${error ? `ERROR request failed code=5${n % 10}2` : 'INFO request ok code=200'} id=${n.toString(16)} user=${(n * 7919) % 100_000}`;
    lines.push(line);
    size += line.length + 1;
  }
  return { text: `${lines.join('\n')}\n`, errorsPerService };
}

const format = (counts: ReadonlyMap<string, number>): string =>
  [...counts]
    .toSorted(([a], [b]) => a.localeCompare(b))
    .map(([service, count]) => `${service}=${count}`)
    .join(' ');

/** The output of the last tool call a request carries (the Responses API's `input`, or Chat Completions' `messages`). */
function lastToolOutput(request: FakeRequest): string {
  const json = request.json as { input?: { type?: string; output?: unknown }[]; messages?: { role?: string; content?: unknown }[] } | undefined;
  const output = json?.input?.findLast((item) => item.type === 'function_call_output')?.output ?? json?.messages?.findLast((item) => item.role === 'tool')?.content;
  return typeof output === 'string' ? output : JSON.stringify(output ?? '');
}

/** The agent: reads the file, maps it, sums the chunks' answers (reading them whole when they became an artifact). Each chunk is answered after 300 ms, with its tokens as usage. */
function agent(file: string): (request: FakeRequest) => FakeReply {
  let answers: string | undefined;
  let read = 0;
  const totals = new Map<string, number>();
  return (request) => {
    if (request.body.includes('You are given one chunk of a larger text')) {
      const counts = new Map<string, number>();
      for (const match of request.body.matchAll(/\\n\d+: [^\\]* (svc-\d+) ERROR /g)) counts.set(match[1] as string, (counts.get(match[1] as string) ?? 0) + 1);
      return { kind: 'turn', text: counts.size === 0 ? 'nothing' : format(counts), usage: { input: request.tokens ?? 0, output: 20 }, delayMs: MAP_CALL_MS };
    }
    const last = lastToolOutput(request);
    const artifact = /artifact (art_[0-9a-f]{12}): [\d,]+ bytes/.exec(request.body)?.[1];
    if (artifact === undefined) return { kind: 'turn', toolCalls: [{ name: 'files__read_text_file', args: { path: file } }] };
    if (!/answered on each of \d+ chunks/.test(request.body)) {
      return { kind: 'turn', toolCalls: [{ name: 'klym__map_artifact', args: { artifact, instruction: 'Count the ERROR lines per service; answer as service=count pairs separated by spaces.' } }] };
    }
    // Too many chunks' answers for the conversation: they came back as an artifact of their own, read a
    // page at a time (a page too big would become an artifact again), its answers added up as they come.
    answers ??= /^artifact (art_[0-9a-f]{12}): .* the whole result of klym__map_artifact/.exec(last)?.[1];
    if (answers !== undefined && !/^artifact art_[0-9a-f]{12}: [\d,]+ bytes/.test(last)) {
      for (const match of last.matchAll(/(svc-\d+)=(\d+)/g)) totals.set(match[1] as string, (totals.get(match[1] as string) ?? 0) + Number(match[2]));
      read = Number(/… lines (\d+) to \d+ follow/.exec(last)?.[1] ?? Number.NaN);
      if (Number.isNaN(read)) return { kind: 'turn', text: format(totals) };
    }
    if (answers !== undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__read_artifact', args: { artifact: answers, offset: read, limit: 100 } }] };
    for (const match of last.matchAll(/(svc-\d+)=(\d+)/g)) totals.set(match[1] as string, (totals.get(match[1] as string) ?? 0) + Number(match[2]));
    return { kind: 'turn', text: format(totals) };
  };
}

interface ChildFigures {
  readonly runMs: number;
  readonly peakGrowthMiB: number;
  readonly artifactBytes: number;
  readonly chunks: number;
  readonly mapInputTokens: number;
  readonly mapMs: number;
  readonly grepMs: number;
  readonly grepMatches: number;
  readonly answer: string;
}

export async function heavy({ quick }: { quick: boolean }): Promise<string[]> {
  const megabytes = quick ? 10 : 50;
  const directory = await mkdtemp(path.join(tmpdir(), 'klym-bench-heavy-'));
  const { text, errorsPerService } = logOf(megabytes);
  const file = path.join(directory, 'night.log');
  await writeFile(file, text);
  await using llm = await startFakeLlmServer(agent(file), { contextWindow: WINDOW });
  try {
    const child = path.join(import.meta.dirname, 'heavy-child.ts');
    const { stdout } = await run(process.execPath, ['--expose-gc', '--conditions=klym-source', child, directory, 'night.log', llm.openaiBaseUrl, String(WINDOW)], { maxBuffer: 2 ** 20, timeout: 900_000 });
    const figures = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as ChildFigures;
    const requestTokens = llm.requests.map((request) => request.tokens ?? Number.POSITIVE_INFINITY);
    const largest = Math.max(...requestTokens);
    const logTokens = countTokens(text);
    const artifactMb = figures.artifactBytes / 1e6;
    const ideal = Math.ceil(figures.chunks / ARTIFACT_DEFAULTS.mapConcurrency) * MAP_CALL_MS;
    const correct = figures.answer === format(errorsPerService);
    return [
      `A ${megabytes} MB log (${logTokens.toLocaleString('en-US')} tokens by o200k_base, ${(logTokens / WINDOW).toFixed(0)}× a ${WINDOW.toLocaleString('en-US')}-token window), read through server-filesystem over stdio, kept as an artifact, mapped in ${figures.chunks} chunks (${ARTIFACT_DEFAULTS.mapConcurrency} at a time, ${MAP_CALL_MS} ms a call); the answer is ${correct ? 'exact' : `WRONG: ${figures.answer.slice(0, 120)}`}.`,
      '',
      '| figure | value | target |',
      '| --- | --- | --- |',
      `| largest model request ÷ window | ${ratio(largest / WINDOW)} (${largest.toLocaleString('en-US')} tokens) | ≤ 0.95 |`,
      `| map input tokens ÷ log tokens | ${ratio(figures.mapInputTokens / logTokens)} | ≤ 1.3 |`,
      `| map wall time ÷ ⌈chunks ÷ concurrency⌉ × ${MAP_CALL_MS} ms | ${ratio(figures.mapMs / ideal)} (${(figures.mapMs / 1000).toFixed(1)} s ÷ ${(ideal / 1000).toFixed(1)} s) | ≤ 1.25 |`,
      `| peak RSS growth ÷ artifact MB | ${(figures.peakGrowthMiB / artifactMb).toFixed(2)} MiB/MB (${figures.peakGrowthMiB.toFixed(0)} MiB for ${artifactMb.toFixed(1)} MB) | ≤ 3 |`,
      `| grep over the artifact | ${(figures.grepMs / artifactMb).toFixed(2)} ms/MB (${figures.grepMs.toFixed(0)} ms, ${figures.grepMatches} matches) | ≤ 20 |`,
      '',
      `The whole run (read, keep, map, answer): ${(figures.runMs / 1000).toFixed(1)} s. Tokens are o200k_base's, as the fake counts each request (and refuses one past the window, as OpenAI does).`,
      figure('heavy_answer_exact', correct ? 1 : 0, 0),
      figure('heavy_max_request_ratio', largest / WINDOW),
      figure('heavy_map_tokens_ratio', figures.mapInputTokens / logTokens),
      figure('heavy_map_wall_ratio', figures.mapMs / ideal),
      figure('heavy_rss_mib_per_mb', figures.peakGrowthMiB / artifactMb),
      figure('heavy_grep_ms_per_mb', figures.grepMs / artifactMb),
    ];
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
