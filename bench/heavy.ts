// Scenario 10 (issues #27, #31): heavy inputs, the same questions through klym__map_artifact and through
// klym__query_artifact, side by side in one run. A log far bigger than the model's window, read through
// @modelcontextprotocol/server-filesystem over stdio, and the graph's 120,000 Event nodes from the fake grynya
// over legacy SSE (one line of JSON, kept as records), each kept as an artifact; a local fake of the OpenAI API
// plays the agent (`heavy-agents.ts`). Each run is a process of its own (`heavy-child.ts`, `heavy-graph-child.ts`),
// with a fake of its own, so that its peak RSS is its own and every model request counted is its own; its memory
// is read as the process group's too, its query processes' with it (issue #39), and the query paths run again on
// a small input, so that what does not grow with the input is told apart from what does. `heavy-grep-child.ts`
// measures a grep as a task pays it, from the SQLite store; `query-bomb-child.ts` what the serving process grows
// by while a 2.5 GB answer is queried.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ARTIFACT_DEFAULTS } from '@klym/core/artifacts';
import { bigGraphFacts, createFakeGrynya, eventRow } from '@klym/fake-grynya';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';
import { GRAPH_QUERY, MAP_CALL_MS, graphInput, grepAgent, logInput, mapAgent, queryAgent, type Agent } from './heavy-agents.ts';
import type { RunFigures } from './heavy-run.ts';
import { figure, ratio } from './stats.ts';

const run = promisify(execFile);
/** The model's window: Klym is configured with it, and the fake refuses a request past it, counted by o200k_base as OpenAI counts. */
const WINDOW = 128_000;
/** Issue #39's bar for the process group's (serving and query processes') peak RSS growth per artifact MB. */
const RSS_TARGET_MIB_PER_MB = 3;
/** Issue #39's bar for the serving process's growth while the 250,000 × 10 KB answer is queried, in MiB. */
const BOMB_TARGET_MIB = 64;
/** The query bomb of issue #39: an answer of 250,000 rows of 10 KB. */
const BOMB_SQL = "SELECT repeat('x', 10000) || range::VARCHAR FROM range(250000)";
/** The small inputs the query paths run again on: what they grow by is what does not grow with the input. */
const SMALL_MEGABYTES = 1;
const SMALL_EVENTS = 5_000;
/** The log map run again within `max_tokens` 300,000, a fraction of what it needs, as issue #39 measured it (376,000 spent). */
const MAP_BUDGET_TOKENS = 300_000;

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

/** One run: what its child reported, and the tokens of each model request its fake received. */
interface Measured {
  readonly figures: RunFigures;
  readonly requests: readonly number[];
  /** Its answer is the expected one. */
  readonly exact: boolean;
  /** How the map's answers came back: in its answer, or only as its table (too many to send). */
  readonly mapAnswers: 'inline' | 'table only';
}

/** Runs `child` against a fresh fake playing `agent`; its answer checked by `check`. */
async function measure(agent: Agent, child: string, args: (baseURL: string) => string[], check: (answer: string) => boolean): Promise<Measured> {
  await using llm = await startFakeLlmServer(agent, { contextWindow: WINDOW });
  const script = path.join(import.meta.dirname, child);
  const { stdout } = await run(process.execPath, ['--expose-gc', '--conditions=klym-source', script, ...args(llm.openaiBaseUrl)], {
    maxBuffer: 2 ** 20,
    timeout: 900_000,
  });
  const figures = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as RunFigures;
  const tableOnly = llm.requests.some((request) => request.body.includes(' answers (') && request.body.includes(' are too many to send: query table art_'));
  return {
    figures,
    requests: llm.requests.map((request) => request.tokens ?? Number.POSITIVE_INFINITY),
    exact: check(figures.answer),
    mapAnswers: tableOnly ? 'table only' : 'inline',
  };
}

/** Runs `child` (no fake model) and reads the JSON line it prints last. */
async function runJson<T>(child: string, execArgv: readonly string[] = []): Promise<T> {
  const script = path.join(import.meta.dirname, child);
  const { stdout } = await run(process.execPath, [...execArgv, '--conditions=klym-source', script], { maxBuffer: 2 ** 20, timeout: 300_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as T;
}

/** `service,count` lines as a map. */
const countsIn = (answer: string): Map<string, number> =>
  new Map(
    answer
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => [line.split(',')[0] ?? '', Number(line.split(',')[1])] as const),
  );
const sameCounts = (answer: string, expected: ReadonlyMap<string, number>): boolean => {
  const counts = countsIn(answer);
  return counts.size === expected.size && [...expected].every(([service, count]) => counts.get(service) === count);
};

const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);
const thousands = (value: number): string => Math.round(value).toLocaleString('en-US');
const tokens = (value: number): string => (value >= 1e6 ? `${(value / 1e6).toFixed(1)} M` : thousands(value));
const small = (value: number): string => (value < 0.1 ? value.toFixed(4) : value.toFixed(2));
const mb = (bytes: number): number => bytes / 1e6;
const tokenRatio = (measured: Measured, inputTokens: number): number => sum(measured.requests) / inputTokens;
const largest = (measured: Measured): number => Math.max(...measured.requests);
/** A map's wall time were its calls all 300 ms and always 4 under way. */
const ideal = (figures: RunFigures): number => Math.ceil(figures.chunks / ARTIFACT_DEFAULTS.mapConcurrency) * MAP_CALL_MS;
const perMb = (figures: RunFigures, value: number): number => value / mb(figures.artifactBytes);

/** What a run grows by per MB more of artifact than its small run: the group's, and its parts' at each peak. */
function slope(big: RunFigures, smallRun: RunFigures): { readonly group: number; readonly serving: number; readonly query: number } {
  const megabytes = mb(big.artifactBytes) - mb(smallRun.artifactBytes);
  return {
    group: (big.group.growthMiB - smallRun.group.growthMiB) / megabytes,
    serving: (big.group.servingMiB - smallRun.group.servingMiB) / megabytes,
    query: (big.group.queryProcessesMiB - smallRun.group.queryProcessesMiB) / megabytes,
  };
}

/** A row of where a query path's MiBs go: its group's peak, what its small run grew by, and the growth per MB past it. */
function breakdown(name: string, big: RunFigures, smallRun: RunFigures): string {
  const perMegabyte = slope(big, smallRun);
  const { growthMiB, servingMiB, queryProcessesMiB } = smallRun.group;
  return [
    `| ${name}`,
    `${thousands(big.group.growthMiB)} MiB for ${mb(big.artifactBytes).toFixed(1)} MB`,
    `${thousands(growthMiB)} MiB (${thousands(servingMiB)} + ${thousands(queryProcessesMiB)}), for ${mb(smallRun.artifactBytes).toFixed(1)} MB`,
    `${perMegabyte.group.toFixed(1)} MiB/MB (${perMegabyte.serving.toFixed(1)} + ${perMegabyte.query.toFixed(1)}) |`,
  ].join(' | ');
}

export async function heavy({ quick }: { quick: boolean }): Promise<string[]> {
  const megabytes = quick ? 10 : 24;
  const events = quick ? 60_000 : 120_000;
  const directory = await mkdtemp(path.join(tmpdir(), 'klym-bench-heavy-'));
  try {
    const log = logOf(megabytes);
    const file = path.join(directory, 'night.log');
    await writeFile(file, log.text);
    const logTokens = countTokens(log.text);
    const smallLog = logOf(SMALL_MEGABYTES);
    await writeFile(path.join(directory, 'small.log'), smallLog.text);
    await using grynya = await createFakeGrynya({ bigGraph: { events } });
    await using smallGrynya = await createFakeGrynya({ bigGraph: { events: SMALL_EVENTS } });
    const smallErrors = new Map(Object.entries(bigGraphFacts(SMALL_EVENTS).errorsByService).filter(([, count]) => count > 0));
    // query_graph's answer as the real server writes it: json.dumps of the envelope around the rows, on one line.
    const graphText = `{"status": "success", "results": ${grynya.graph.queryJson(GRAPH_QUERY)}}`;
    const graphTokens = countTokens(graphText);
    const facts = bigGraphFacts(events);
    const errorsByService = new Map(Object.entries(facts.errorsByService).filter(([, count]) => count > 0));
    // A needle far into the answer: past anything a cut at its first characters could show.
    const trace = eventRow(Math.floor(events * 0.823)).e.trace_id;
    const needle = facts.rowOfTrace(trace);
    const needleAnswer = needle === undefined ? 'no such event' : `${needle.e.id} carries it: ${needle.e.message}`;

    const logRun = (agent: Agent, maxTokens?: number, name = 'night.log', expected = log.errorsPerService): Promise<Measured> =>
      measure(
        agent,
        'heavy-child.ts',
        (baseURL) => [directory, name, baseURL, String(WINDOW), ...(maxTokens === undefined ? [] : [String(maxTokens)])],
        (answer) => sameCounts(answer, expected),
      );
    const graphRun = async (agent: Agent, prompt: string, check: (answer: string) => boolean, server = grynya): Promise<Measured> => {
      const taskDirectory = await mkdtemp(path.join(directory, 'graph-'));
      return measure(agent, 'heavy-graph-child.ts', (baseURL) => [taskDirectory, server.sseUrl, baseURL, String(WINDOW), prompt], check);
    };
    const errorsQuestion = 'How many error events does each service have?';
    const runs = {
      logMap: await logRun(mapAgent(logInput(file))),
      logQuery: await logRun(queryAgent(logInput(file))),
      graphMap: await graphRun(mapAgent(graphInput), errorsQuestion, (answer) => sameCounts(answer, errorsByService)),
      graphQuery: await graphRun(queryAgent(graphInput), errorsQuestion, (answer) => sameCounts(answer, errorsByService)),
      graphGrep: await graphRun(
        grepAgent(graphInput, trace),
        `Which event carries trace ${trace}, and what does its message say?`,
        (answer) => answer === needleAnswer,
      ),
    };
    const smallRuns = {
      logQuery: await logRun(queryAgent(logInput(path.join(directory, 'small.log'))), undefined, 'small.log', smallLog.errorsPerService),
      graphQuery: await graphRun(queryAgent(graphInput), errorsQuestion, (answer) => sameCounts(answer, smallErrors), smallGrynya),
    };
    // Its answer is partial by design: kept out of `runs`, whose answers must be exact.
    const budgeted = (await logRun(mapAgent(logInput(file)), MAP_BUDGET_TOKENS)).figures;
    const overshoot = Math.max(0, (budgeted.totalTokens ?? Number.POSITIVE_INFINITY) - MAP_BUDGET_TOKENS);
    const { stdout } = await run(
      process.execPath,
      ['--conditions=klym-source', path.join(import.meta.dirname, 'heavy-grep-child.ts'), directory, 'night.log'],
      { maxBuffer: 2 ** 20, timeout: 300_000 },
    );
    const bomb = await runJson<{
      rowCount: number;
      rows: number;
      queryMs: number;
      bombMiB: number;
      queryProcessPeakMiB: number;
      queryProcessIdleMiB: number;
    }>('query-bomb-child.ts', ['--expose-gc']);
    const grep = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
      pattern: string;
      bytes: number;
      coldFirstMs: number;
      firstMs: number;
      loadMs: number;
      warmMs: number;
      matches: number;
    };

    const columns = [
      { name: 'log · map', run: runs.logMap, inputTokens: logTokens },
      { name: 'log · query', run: runs.logQuery, inputTokens: logTokens },
      { name: 'graph · map', run: runs.graphMap, inputTokens: graphTokens },
      { name: 'graph · query', run: runs.graphQuery, inputTokens: graphTokens },
      { name: 'graph · grep', run: runs.graphGrep, inputTokens: graphTokens },
    ];
    const row = (label: string, cell: (column: (typeof columns)[number]) => string, target: string): string =>
      `| ${label} | ${columns.map(cell).join(' | ')} | ${target} |`;
    const wrong = Object.values(runs).flatMap((measured) =>
      measured.exact ? [] : [`\`${measured.figures.finishReason}\`: ${measured.figures.answer.slice(0, 160).replaceAll('\n', ' ')}`],
    );
    const failed = Object.values(runs).flatMap((measured) => measured.figures.toolErrors);

    return [
      [
        `A ${megabytes} MB log (${thousands(logTokens)} tokens by o200k_base, ${(logTokens / WINDOW).toFixed(0)}× a ${thousands(WINDOW)}-token window),`,
        `read through server-filesystem over stdio; and the graph's ${thousands(events)} Event nodes, \`query_graph\`'s one-line answer of`,
        `${mb(Buffer.byteLength(graphText)).toFixed(1)} MB (${thousands(graphTokens)} tokens, ${(graphTokens / WINDOW).toFixed(0)}× the window) from the fake grynya`,
        `over legacy SSE, kept as ${thousands(events)} records (${mb(runs.graphQuery.figures.artifactBytes).toFixed(1)} MB).`,
        "Each column is one run (the graph's, one task over the SQLite store), its own process and its own fake model;",
        `map calls are answered after ${MAP_CALL_MS} ms, ${ARTIFACT_DEFAULTS.mapConcurrency} at a time. The map path adds its chunks' answers`,
        "(JSON objects {service: count}) with one `klym__query_artifact` over the map's table (an UNPIVOT and a sum).",
      ].join(' '),
      '',
      `| figure | ${columns.map((column) => column.name).join(' | ')} | target |`,
      `| --- | ${columns.map(() => '---').join(' | ')} | --- |`,
      row('the answer', (column) => (column.run.exact ? 'exact' : 'WRONG'), 'exact'),
      row('model requests', (column) => String(column.run.requests.length), ''),
      row('model input tokens, every request', (column) => tokens(sum(column.run.requests)), ''),
      row("÷ the input's tokens", (column) => small(tokenRatio(column.run, column.inputTokens)), 'query ≤ 0.01; map ≤ 1.3'),
      row('largest request ÷ window', (column) => small(largest(column.run) / WINDOW), '≤ 0.95'),
      row(
        'the map call',
        (column) =>
          column.run.figures.mapMs === 0
            ? '—'
            : `${(column.run.figures.mapMs / 1000).toFixed(1)} s, ${column.run.figures.chunks} chunks; answers ${column.run.mapAnswers}`,
        '',
      ),
      row(
        `map wall time ÷ ⌈chunks ÷ ${ARTIFACT_DEFAULTS.mapConcurrency}⌉ × ${MAP_CALL_MS} ms`,
        (column) => (column.run.figures.mapMs === 0 ? '—' : ratio(column.run.figures.mapMs / ideal(column.run.figures))),
        '≤ 1.25',
      ),
      row(
        'the query call (loading its table included)',
        (column) =>
          column.run.figures.queryMs === 0
            ? '—'
            : `${thousands(column.run.figures.queryMs)} ms${column.run.figures.mapMs === 0 ? '' : " (the map's table)"}, of which DuckDB ${thousands(column.run.figures.queryDuckDbMs)} ms`,
        '',
      ),
      row(
        '… per MB of artifact',
        (column) =>
          column.run.figures.queryMs === 0 || column.run.figures.mapMs > 0 ? '—' : `${perMb(column.run.figures, column.run.figures.queryMs).toFixed(1)} ms/MB`,
        '≤ 50',
      ),
      row(
        'peak RSS growth ÷ artifact MB: the serving process',
        (column) =>
          `${perMb(column.run.figures, column.run.figures.peakGrowthMiB).toFixed(1)} MiB/MB (${thousands(column.run.figures.peakGrowthMiB)} MiB for ${mb(column.run.figures.artifactBytes).toFixed(1)} MB)`,
        '',
      ),
      row(
        '… the process group: serving + query processes',
        (column) =>
          `${perMb(column.run.figures, column.run.figures.group.growthMiB).toFixed(1)} MiB/MB (${thousands(column.run.figures.group.servingMiB)} + ${thousands(column.run.figures.group.queryProcessesMiB)} MiB)`,
        `query ≤ ${RSS_TARGET_MIB_PER_MB}`,
      ),
      row('the whole run', (column) => `${(column.run.figures.runMs / 1000).toFixed(1)} s`, ''),
      '',
      [
        `Where the query paths' MiBs go: the same runs on a ${SMALL_MEGABYTES} MB log and on ${thousands(SMALL_EVENTS)} events give what does not grow with`,
        `the input (Node's and the run's code, o200k's tables, a query process with DuckDB loaded: ${thousands(bomb.queryProcessIdleMiB)} MiB idle);`,
        'the rest, over the difference in MB, is what each MB of artifact costs.',
      ].join(' '),
      '',
      '| path | group at its peak | does not grow with the input: serving + query processes | per MB of artifact: serving + query processes |',
      '| --- | --- | --- | --- |',
      breakdown('log · query', runs.logQuery.figures, smallRuns.logQuery.figures),
      breakdown('graph · query', runs.graphQuery.figures, smallRuns.graphQuery.figures),
      '',
      [
        `The query bomb: \`${BOMB_SQL}\` (250,000 rows of 10 KB, 2.5 GB) through a task manager's \`queryArtifacts\`, cold (its query`,
        `processes not yet started): ${thousands(bomb.rowCount)} rows counted, ${bomb.rows} on the page, in ${thousands(bomb.queryMs)} ms; the serving process grew`,
        `${bomb.bombMiB.toFixed(1)} MiB (target ≤ ${BOMB_TARGET_MIB}), its query process peaked at ${thousands(bomb.queryProcessPeakMiB)} MiB.`,
      ].join(' '),
      '',
      [
        "A grep as a task pays it: the log kept as a task's artifact in the SQLite store, and each first grep made by a fresh",
        'artifact store, which reads it from SQLite, indexes its lines and searches them, in a process that has grepped before',
        `(as a server has) and in one that had not. \`${grep.pattern}\` (no literal prefix), ${grep.matches} matches in ${mb(grep.bytes).toFixed(1)} MB:`,
      ].join(' '),
      '',
      '| grep | time | per MB | target |',
      '| --- | --- | --- | --- |',
      `| first, from the store: read (${thousands(grep.loadMs)} ms), index, search | ${thousands(grep.firstMs)} ms | ${(grep.firstMs / mb(grep.bytes)).toFixed(1)} ms/MB | ≤ 20 |`,
      `| first, in a fresh process (V8 compiling the search as it runs) | ${thousands(grep.coldFirstMs)} ms | ${(grep.coldFirstMs / mb(grep.bytes)).toFixed(1)} ms/MB | |`,
      `| warm: its lines indexed, median of 5 | ${thousands(grep.warmMs)} ms | ${(grep.warmMs / mb(grep.bytes)).toFixed(1)} ms/MB | |`,
      '',
      [
        "Tokens are o200k_base's, as the fake counts each request (and refuses one past the window, as OpenAI does);",
        "a run's are every request its fake received, a map's calls included.",
        `The log's map run again with \`max_tokens\` ${thousands(MAP_BUDGET_TOKENS)} spent ${thousands(budgeted.totalTokens ?? 0)} tokens in ${budgeted.chunks} chunks (\`${budgeted.finishReason}\`).`,
        ...(wrong.length === 0 ? [] : [`Wrong answers: ${wrong.join('; ')}.`]),
        ...(failed.length === 0 ? [] : [`Failed tool calls: ${failed.join('; ')}.`]),
      ].join(' '),
      figure('heavy_answer_exact', runs.logMap.exact && runs.logQuery.exact ? 1 : 0, 0),
      figure('graph_answer_exact', runs.graphGrep.exact && runs.graphQuery.exact ? 1 : 0, 0),
      figure('heavy_max_request_ratio', Math.max(...columns.map((column) => largest(column.run))) / WINDOW),
      figure('heavy_query_tokens_ratio', tokenRatio(runs.logQuery, logTokens), 4),
      figure('heavy_map_tokens_ratio', tokenRatio(runs.logMap, logTokens)),
      figure('graph_query_tokens_ratio', tokenRatio(runs.graphQuery, graphTokens), 4),
      figure('graph_map_tokens_ratio', tokenRatio(runs.graphMap, graphTokens)),
      figure('map_budget_overshoot', overshoot, 0),
      figure('heavy_map_wall_ratio', runs.logMap.figures.mapMs / ideal(runs.logMap.figures)),
      figure('heavy_query_ms_per_mb', perMb(runs.logQuery.figures, runs.logQuery.figures.queryMs), 1),
      figure('graph_query_ms_per_mb', perMb(runs.graphQuery.figures, runs.graphQuery.figures.queryMs), 1),
      figure('heavy_rss_mib_per_mb', perMb(runs.logQuery.figures, runs.logQuery.figures.group.growthMiB), 1),
      figure('graph_rss_mib_per_mb', perMb(runs.graphQuery.figures, runs.graphQuery.figures.group.growthMiB), 1),
      figure('heavy_serving_rss_mib_per_mb', perMb(runs.logQuery.figures, runs.logQuery.figures.peakGrowthMiB), 1),
      figure('graph_serving_rss_mib_per_mb', perMb(runs.graphQuery.figures, runs.graphQuery.figures.peakGrowthMiB), 1),
      figure('heavy_rss_slope_mib_per_mb', slope(runs.logQuery.figures, smallRuns.logQuery.figures).group, 1),
      figure('graph_rss_slope_mib_per_mb', slope(runs.graphQuery.figures, smallRuns.graphQuery.figures).group, 1),
      figure('heavy_map_rss_mib_per_mb', perMb(runs.logMap.figures, runs.logMap.figures.group.growthMiB), 1),
      figure('query_bomb_rss_mib', bomb.bombMiB, 1),
      figure('heavy_grep_ms_per_mb', grep.firstMs / mb(grep.bytes), 1),
      figure('heavy_grep_cold_ms_per_mb', grep.coldFirstMs / mb(grep.bytes), 1),
      figure('heavy_grep_warm_ms_per_mb', grep.warmMs / mb(grep.bytes), 1),
    ];
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
