// Issue #39: every exact answer is exact on real documents of any shape. Records are typed from every value
// of every record; a JSON document that is not records is kept whole and queryable by its paths. Real
// documents from npm packages (what a fetch or an API tool returns), each asked an aggregate and a lookup
// whose truth is computed here in JS from the same file.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createArtifactQuery, createQueryProcesses, type ArtifactQuery, type QueryAnswer } from './artifact-query.ts';
import { createArtifactStore, createMemoryArtifacts, type ArtifactStore } from './artifact-store.ts';
import { artifactReference, tableColumns } from './result-keeping.ts';
import { createTokenCounter } from '../agent/token-count.ts';
import type { ArtifactInfo } from './artifact-types.ts';

const require = createRequire(import.meta.url);
const fileOf = (name: string): string => readFileSync(require.resolve(name), 'utf8');

// One task per document, as Grynya would delegate them: each its own DuckDB, in query processes they share.
const processes = createQueryProcesses({ processes: 1, maxConcurrent: 1, memoryMiB: 512, threads: 2 });
afterAll(() => processes.close());
let duck: ArtifactQuery;
let store: ArtifactStore;
beforeEach(() => {
  const backend = createMemoryArtifacts();
  store = createArtifactStore({ backend });
  duck = createArtifactQuery({ source: backend, processes });
  return () => duck.close();
});

const keep = (text: string): Promise<ArtifactInfo> => store.put('fetch__get', text);
const single = async (sql: string): Promise<unknown> => {
  const answer: QueryAnswer = await duck.query(sql);
  expect(answer.rowCount).toBe(1);
  return answer.rows[0]?.[0];
};

describe('records typed from every value', () => {
  it('sums, counts and finds values that change type after the first 25,000 records, and a key first seen in record 25,001', async () => {
    const records = Array.from({ length: 30_000 }, (_, n) => (n < 25_000 ? { ms: 1, code: 200 } : { ms: 1.5, code: 'timeout', retried: true }));
    const kept = await keep(JSON.stringify(records));
    expect(await single(`SELECT sum(ms) FROM ${kept.id}`)).toBe(records.reduce((sum, record) => sum + record.ms, 0)); // 32,500
    expect(await single(`SELECT count(code) FROM ${kept.id}`)).toBe(30_000);
    expect(await single(`SELECT count(*) FROM ${kept.id} WHERE code->>'$' = 'timeout'`)).toBe(records.filter((record) => record.code === 'timeout').length);
    expect(await single(`SELECT count(retried) FROM ${kept.id}`)).toBe(5_000);
    // The model is told every column with its type, and how to compare a JSON one.
    const told = tableColumns(kept);
    expect(told).toContain('ms DOUBLE, code JSON, retried BOOLEAN');
    expect(told).toContain("col->>'$'");
    expect((await duck.describe(kept.id)).map((column) => `${column.name} ${column.type}`)).toEqual(['n BIGINT', 'ms DOUBLE', 'code JSON', 'retried BOOLEAN']);
  });

  it('keeps integers past 2^53 exact, as the tool wrote them', async () => {
    const text = '[{"id": 9007199254740993, "n": 1}, {"id": 9223372036854775807, "n": 2}, {"id": 12345678901234567890123, "n": 3}]';
    const kept = await keep(text);
    const answer = await duck.query(`SELECT id::VARCHAR AS id FROM ${kept.id} ORDER BY n_1`);
    expect(answer.rows.map((row) => row[0])).toEqual(['9007199254740993', '9223372036854775807', '12345678901234567890123']);
  });
});

describe('real documents from npm packages', () => {
  it('an array of 1,911 records with varying keys (emoji-datasource): every key a column, an aggregate and a lookup', async () => {
    const text = fileOf('emoji-datasource/emoji.json');
    const emoji = JSON.parse(text) as { unified: string; short_name: string; category: string; skin_variations?: object; obsoleted_by?: string }[];
    const kept = await keep(text);
    expect(kept.records?.count).toBe(emoji.length);
    const keys = new Set(emoji.flatMap((record) => Object.keys(record)));
    // More keys than the first record has: each is a column, and the model is told each.
    expect(keys.size).toBeGreaterThan(Object.keys(emoji[0] as object).length);
    for (const key of keys) expect(tableColumns(kept)).toContain(`${key} `);
    expect(await single(`SELECT count(*) FROM ${kept.id} WHERE skin_variations IS NOT NULL`)).toBe(emoji.filter((record) => record.skin_variations).length);
    expect(await single(`SELECT count(*) FROM ${kept.id} WHERE obsoleted_by IS NOT NULL`)).toBe(emoji.filter((record) => record.obsoleted_by).length);
    expect(await single(`SELECT short_name FROM ${kept.id} WHERE unified = '1F600'`)).toBe(emoji.find((record) => record.unified === '1F600')?.short_name);
  });

  it("tells a record artifact's size as the tool gave it, and its tokens as the run's tokenizer counts them", async () => {
    const text = fileOf('emoji-datasource/emoji.json');
    const counter = await createTokenCounter('openai:gpt-4o');
    const counted = createArtifactStore({ backend: createMemoryArtifacts(), countTokens: counter.count });
    const kept = await counted.put('fetch__get', text);
    const { index } = await counted.lines(kept.id);
    const lines = Array.from({ length: index.count }, (_, n) => index.line(n)).join('\n');
    expect(kept.tokens).toBe(counter.count(lines));
    const reference = artifactReference(kept, index, { queries: true, tokenizer: counter.tokenizer });
    expect(reference.split('\n')[0]).toContain(`${kept.tokens.toLocaleString('en-US')} tokens (o200k_base)`);
    expect(reference).toContain(`It is JSON (${Buffer.byteLength(text).toLocaleString('en-US')} bytes as the tool gave it)`);
    // Without the model's tokenizer, the count says it is an estimate.
    expect(artifactReference(kept, index).split('\n')[0]).toContain('tokens (estimated)');
  });

  it('a pretty-printed file (emoji_pretty.json): records, its own size told, counts per category', async () => {
    const text = fileOf('emoji-datasource/emoji_pretty.json');
    const emoji = JSON.parse(text) as { category: string }[];
    const kept = await keep(text);
    expect(kept.records).toMatchObject({ count: emoji.length, originalBytes: Buffer.byteLength(text) });
    const perCategory = new Map<string, number>();
    for (const record of emoji) perCategory.set(record.category, (perCategory.get(record.category) ?? 0) + 1);
    const answer = await duck.query(`SELECT category, count(*) FROM ${kept.id} GROUP BY ALL ORDER BY category`);
    expect(answer.rows).toEqual([...perCategory].toSorted(([a], [b]) => (a < b ? -1 : 1)).map(([category, records]) => [category, records]));
  });

  it('a deep object of 20 MB (@mdn/browser-compat-data): "how many CSS properties did Firefox support before version 50" in one query, and a lookup', async () => {
    const text = fileOf('@mdn/browser-compat-data');
    type Support = { version_added?: unknown };
    const data = JSON.parse(text) as {
      css: { properties: Record<string, { __compat?: { support: Record<string, Support | Support[]> } }> };
      browsers: Record<string, { name: string }>;
    };
    const kept = await keep(text);
    // Its biggest array of objects is a few browsers' releases: not the document's records.
    expect(kept.records).toBeUndefined();
    expect(kept.json).toBe('document');
    const before50 = Object.values(data.css.properties).filter((property) => {
      // oxlint-disable-next-line no-underscore-dangle -- the document's own key
      const firefox = property.__compat?.support.firefox;
      const added = (Array.isArray(firefox) ? firefox[0] : firefox)?.version_added;
      return typeof added === 'string' && Number.isFinite(Number(added)) && Number(added) < 50;
    }).length;
    expect(before50).toBeGreaterThan(100);
    const sql = `SELECT count(*) FROM ${kept.id}_paths
      WHERE regexp_matches(path, '^\\$\\.css\\.properties\\.[^.\\[]+\\.__compat\\.support\\.firefox(\\[0\\])?\\.version_added$')
        AND type = 'VARCHAR' AND TRY_CAST(value AS DOUBLE) < 50`;
    expect(await single(sql)).toBe(before50);
    expect(await single(`SELECT value FROM ${kept.id}_paths WHERE path = '$.browsers.firefox.name'`)).toBe(data.browsers.firefox?.name);
    expect(await single(`SELECT doc->>'$.browsers.firefox.name' FROM ${kept.id}_doc`)).toBe(data.browsers.firefox?.name);
    // The query the model is told runs on this very document.
    const example = /SELECT key, type FROM \S+ WHERE depth = 1/.exec(tableColumns(kept))?.[0] as string;
    expect((await duck.query(example)).rows.map((row) => row[0])).toEqual(Object.keys(data));
  }, 60_000);

  it('a deep object of 4.7 MB (caniuse-db): features by status, and a lookup', async () => {
    const text = fileOf('caniuse-db/data.json');
    const data = JSON.parse(text) as { data: Record<string, { status: string; title: string }> };
    const kept = await keep(text);
    expect(kept.json).toBe('document');
    const recommended = Object.values(data.data).filter((feature) => feature.status === 'rec').length;
    expect(await single(`SELECT count(*) FROM ${kept.id}_paths WHERE path LIKE '$.data.%' AND depth = 3 AND key = 'status' AND value = 'rec'`)).toBe(
      recommended,
    );
    expect(await single(`SELECT value FROM ${kept.id}_paths WHERE path = '$.data.flexbox.title'`)).toBe(data.data.flexbox?.title);
  });

  it('keeps a small answer whose array is all it is about as records, whatever its share: a status and two results', async () => {
    const kept = await keep(JSON.stringify({ status: 'success', results: [{ a: 1 }, { a: 2 }] }));
    expect(kept.records).toMatchObject({ count: 2, path: ['results'] });
    expect(await single(`SELECT sum(a) FROM ${kept.id}`)).toBe(3);
  });

  it('keeps a text that only looks like JSON as lines, and says which tables it has', async () => {
    const kept = await keep('{"not": "json" after all\n{"second": line}\n');
    expect(kept.json).toBeUndefined();
    expect(kept.records).toBeUndefined();
    expect(await single(`SELECT count(*) FROM ${kept.id}`)).toBe(2);
    await expect(duck.query(`SELECT * FROM ${kept.id}_paths`)).rejects.toMatchObject({
      code: 'QUERY_FAILED',
      message: expect.stringContaining(`${kept.id} is not a JSON document kept whole`),
    });
  });
});
