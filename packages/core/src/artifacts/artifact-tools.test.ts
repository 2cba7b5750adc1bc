import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedModel } from '../agent/scripted-model.ts';
import { estimateTokens } from '../agent/token-count.ts';
import { createArtifactQuery, type ArtifactQuery } from './artifact-query.ts';
import { createArtifactStore, createMemoryArtifacts } from './artifact-store.ts';
import { artifactTools } from './artifact-tools.ts';
import type { ResultKeeping } from './result-keeping.ts';

/** A log of `lines` lines: every 7th an ERROR of one of 5 services. */
function log(lines: number): string {
  const out: string[] = [];
  for (let n = 0; n < lines; n++)
    out.push(`2026-11-25T03:14:15Z svc-${n % 5} ${n % 7 === 3 ? 'ERROR request failed' : 'INFO request ok'} id=${n.toString(16)}`);
  return `${out.join('\n')}\n`;
}
const LOG = log(20_000);
const errorsOf = (service: string): number => LOG.split('\n').filter((line) => line.includes(` ${service} ERROR`)).length;

const engines: ArtifactQuery[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

/** Klym's tools over one run's artifacts, with a real DuckDB and a scripted map model that counts ERROR lines per service as JSON. */
function tools(pageTokens: number): { keep: ResultKeeping; run: (name: string, input: unknown) => Promise<string>; mapCalls: () => number } {
  const backend = createMemoryArtifacts();
  const engine = createArtifactQuery({ source: backend });
  engines.push(engine);
  let calls = 0;
  const keep: ResultKeeping = {
    artifacts: createArtifactStore({ backend, pageTokens }),
    thresholdTokens: pageTokens * 2,
    pageTokens,
    countTokens: estimateTokens,
    query: engine,
    mapping: {
      model: createScriptedModel({
        steps: ({ options }) => {
          calls++;
          const counts: Record<string, number> = {};
          for (const match of JSON.stringify(options.prompt).matchAll(/(svc-\d) ERROR/g)) counts[match[1] as string] = (counts[match[1] as string] ?? 0) + 1;
          return { text: JSON.stringify(counts) };
        },
      }),
      streams: false,
      windowTokens: 8_000,
      concurrency: 2,
      countTokens: estimateTokens,
      maxRetries: 0,
      signal: new AbortController().signal,
    },
  };
  const built = artifactTools(keep);
  return {
    keep,
    mapCalls: () => calls,
    run: (name, input) => {
      const execute = built[name]?.execute as ((input: unknown, options: unknown) => Promise<string>) | undefined;
      if (execute === undefined) throw new Error(`No tool ${name}`);
      return execute(input, { toolCallId: 'c1', messages: [] });
    },
  };
}

describe('klym__query_artifact with the other tools', () => {
  it('keeps an answer too big to send as a table, which a map runs over and whose answers a query adds up exactly', async () => {
    const { keep, run, mapCalls } = tools(1_000);
    const { id } = await keep.artifacts.put('fs__read_text_file', LOG);
    // Only the ERROR lines: ~2,857 rows, far more than a page.
    const selected = await run('klym__query_artifact', { sql: `SELECT n, line FROM ${id} WHERE line LIKE '% ERROR %' ORDER BY n` });
    const errors = LOG.split('\n').filter((line) => line.includes(' ERROR ')).length;
    expect(selected).toMatch(
      new RegExp(`^${errors.toLocaleString('en-US')} rows, too many to send: kept as artifact (art_[0-9a-f]{12}), a table with columns n BIGINT, line VARCHAR`),
    );
    expect(estimateTokens(selected)).toBeLessThan(1_000);
    const kept = /kept as artifact (art_[0-9a-f]{12})/.exec(selected)?.[1] as string;

    // The map reads the kept rows, not the whole log, and its answers are a table too.
    const mapped = await run('klym__map_artifact', {
      artifact: kept,
      instruction: 'Count the ERROR lines per service; answer as a JSON object {service: count}.',
    });
    expect(mapCalls()).toBeGreaterThan(3);
    const [, table, columns = ''] = /The answers are also table (art_[0-9a-f]{12}) \(columns ([^;]*);/.exec(mapped) ?? [];
    // Every answer's fields are named, not only the first answer's.
    expect(columns.split(', ').toSorted()).toEqual(['answer', 'from', 'label', 'n', 'svc-0', 'svc-1', 'svc-2', 'svc-3', 'svc-4', 'to']);
    const sums = await run('klym__query_artifact', { sql: `SELECT sum("svc-0") AS a, sum("svc-3") AS b, count(*) AS chunks FROM ${table}` });
    expect(sums).toBe(`1 row from ${table} (CSV):\na,b,chunks\n${errorsOf('svc-0')},${errorsOf('svc-3')},${mapCalls()}`);

    // The query's own kept answer is records, one per row: the line tools read them too.
    const found = await keep.artifacts.grep(kept, 'id=3\\b');
    expect(found.matches[0]?.text).toBe(JSON.stringify({ n: 3, line: LOG.split('\n')[3] }));
  });

  it('answers a small result inline as CSV, and a bad query as a tool error quoting DuckDB', async () => {
    const { keep, run } = tools(4_000);
    const { id } = await keep.artifacts.put('fs__read_text_file', LOG);
    const counts = await run('klym__query_artifact', {
      sql: `SELECT regexp_extract(line, 'svc-\\d') AS service, count(*) AS errors FROM ${id} WHERE line LIKE '% ERROR %' GROUP BY ALL ORDER BY service`,
    });
    expect(counts).toBe(`5 rows from ${id} (CSV):\nservice,errors\n${[0, 1, 2, 3, 4].map((k) => `svc-${k},${errorsOf(`svc-${k}`)}`).join('\n')}`);
    await expect(run('klym__query_artifact', { sql: `SELECT nope FROM ${id}` })).rejects.toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringContaining('nope'),
    });
    await expect(run('klym__query_artifact', { sql: 'SELECT * FROM art_000000000000' })).rejects.toMatchObject({
      code: 'ARTIFACT_NOT_FOUND',
      message: expect.stringContaining(id),
    });
  });

  it('says which lines a map split, and keeps every piece of a long line in the table', async () => {
    const { keep, run, mapCalls } = tools(4_000);
    const long = Array.from({ length: 30_000 }, (_, n) => `svc-${n % 5} ERROR`).join(' ');
    const { id } = await keep.artifacts.put('grynya__query_graph', `first line\n${long}\nlast line\n`, 'text');
    const mapped = await run('klym__map_artifact', {
      artifact: id,
      instruction: 'Count the ERROR words per service; answer as a JSON object {service: count}.',
    });
    const split = new RegExp(
      `Line 1 \\(${long.length.toLocaleString('en-US')} characters\\) was too long for one chunk: it was split over (\\d+) consecutive chunks`,
    ).exec(mapped);
    expect(Number(split?.[1])).toBeGreaterThan(2);
    const table = /The answers are also table (art_[0-9a-f]{12})/.exec(mapped)?.[1] as string;
    // Added up over the pieces, every ERROR of the long line is counted once (a word cut at a piece's edge is the one allowance).
    const sums = await run('klym__query_artifact', { sql: `SELECT sum(COLUMNS('^svc-')) FROM ${table}` });
    const counts = sums.split('\n')[2]?.split(',').map(Number) ?? [];
    expect(counts.reduce((sum, count) => sum + count, 0)).toBeGreaterThanOrEqual(30_000 - mapCalls());
    expect(counts.reduce((sum, count) => sum + count, 0)).toBeLessThanOrEqual(30_000);
  });
});
