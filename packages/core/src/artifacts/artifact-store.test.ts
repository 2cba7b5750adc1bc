import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createScriptedModel } from '../agent/scripted-model.ts';
import { estimateTokens } from '../agent/token-count.ts';
import { createArtifactStore, createMemoryArtifacts } from './artifact-store.ts';
import { artifactTools } from './artifact-tools.ts';
import { artifactReference, keepBigResult, type ResultKeeping } from './result-keeping.ts';

/** A log of `lines` lines, with `ERROR … code=5xx` on every 1000th and a needle on line `needleAt`. */
function log(lines: number, needleAt: number): string {
  const out: string[] = [];
  for (let n = 0; n < lines; n++) {
    if (n === needleAt) out.push(`2026-11-25T03:14:15.${String(n % 1000).padStart(3, '0')}Z svc-7 FATAL the needle: disk /dev/sdq failed`);
    else if (n % 1000 === 999)
      out.push(`2026-11-25T03:14:15.${String(n % 1000).padStart(3, '0')}Z svc-${n % 13} ERROR request failed code=5${n % 10}2 id=${n.toString(16)}`);
    else out.push(`2026-11-25T03:14:15.${String(n % 1000).padStart(3, '0')}Z svc-${n % 13} INFO request ok code=200 id=${n.toString(16)}`);
  }
  return `${out.join('\n')}\n`;
}

/** A graph answer as grynya-mcp-server gives it: Python's `json.dumps`, one line, `n` Event rows. */
function graphAnswer(rows: number): string {
  const results = Array.from({ length: rows }, (_, n) => ({
    e: {
      id: `ev-${n}`,
      label: 'Event',
      service: `svc-${n % 7}`,
      severity: n % 10 === 0 ? 'error' : 'info',
      trace_id: `tr-${(n * 7919).toString(16).padStart(8, '0')}`,
      message: `step ${n} of the night`,
    },
  }));
  return JSON.stringify({ status: 'success', results }).replaceAll('","', '", "').replaceAll('":', '": ');
}

const LOG = log(20_000, 12_345);

/** Calls one of the built-in tools as the AI SDK would. */
function runner(keep: ResultKeeping): (name: string, input: unknown) => Promise<string> {
  const tools = artifactTools(keep);
  return (name, input) => {
    const execute = tools[name]?.execute as ((input: unknown, options: unknown) => Promise<string>) | undefined;
    if (execute === undefined) throw new Error(`No tool ${name}`);
    return execute(input, { toolCallId: 'c1', messages: [] });
  };
}

describe('createArtifactStore', () => {
  it('keeps a text whole and counts its bytes, lines and tokens; reads it by pages of lines', async () => {
    const artifacts = createArtifactStore();
    const info = await artifacts.put('fs__read_text_file', LOG);
    expect(info).toMatchObject({
      id: expect.stringMatching(/^art_[0-9a-f]{12}$/),
      tool: 'fs__read_text_file',
      bytes: Buffer.byteLength(LOG),
      lines: 20_000,
      tokens: estimateTokens(LOG),
    });
    expect(info.records).toBeUndefined();
    const slice = await artifacts.read(info.id, { offset: 12_344, limit: 3 });
    expect(slice.lines.map((line) => line.text)).toEqual(LOG.split('\n').slice(12_344, 12_347));
    expect(slice).toMatchObject({ offset: 12_344, next: { offset: 12_347 } });
    const end = await artifacts.read(info.id, { offset: 19_998 });
    expect(end.lines.map((line) => line.text)).toEqual(LOG.split('\n').slice(19_998, 20_000));
    expect(end.next).toBeUndefined();
    expect((await artifacts.list()).map((artifact) => artifact.id)).toEqual([info.id]);
  });

  it('stops a page before it passes pageTokens, and pages through a line too long for one, every character once', async () => {
    const artifacts = createArtifactStore({ pageTokens: 2_000 });
    const { id } = await artifacts.put('fs__read_text_file', LOG);
    // 500 lines of ~70 characters do not fit 2,000 tokens: the page stops early and says where to go on.
    const page = await artifacts.read(id, { limit: 500 });
    expect(page.lines.length).toBeGreaterThan(10);
    expect(page.lines.length).toBeLessThan(500);
    expect(page.next).toEqual({ offset: page.lines.length });
    expect(estimateTokens(page.lines.map((line) => `${line.n}: ${line.text}`).join('\n'))).toBeLessThanOrEqual(2_000);

    const long = `${'x'.repeat(10)}\n${Array.from({ length: 40_000 }, (_, n) => `k${n}=v${(n * 31) % 977};`).join('')}\nlast line\n`;
    const { id: longId } = await artifacts.put('grynya__query_graph', long);
    const line = long.split('\n')[1] as string;
    let next: { offset: number; charOffset?: number } | undefined = { offset: 1 };
    let rebuilt = '';
    let pages = 0;
    let after: string[] = [];
    while (next?.offset === 1) {
      const part = await artifacts.read(longId, { offset: 1, ...(next.charOffset === undefined ? {} : { charOffset: next.charOffset }) });
      const [first, ...rest] = part.lines;
      // Read on from where the page before said: line 1 from that character, whole or in part.
      expect(first).toMatchObject({ n: 1, text: line.slice(next.charOffset ?? 0, (next.charOffset ?? 0) + (first?.text.length ?? 0)) });
      expect(estimateTokens(part.lines.map((one) => one.text).join('\n'))).toBeLessThanOrEqual(2_000);
      rebuilt += first?.text ?? '';
      after = rest.map((one) => one.text);
      next = part.next;
      pages++;
    }
    expect(rebuilt).toBe(line);
    expect(pages).toBeGreaterThan(10);
    // The page that ends the long line goes on with the lines after it.
    expect(after).toEqual(['last line']);
    expect(next).toBeUndefined();
  });

  it('greps in linear time: matches with their line numbers and context, counted past max_matches, and a pattern that backtracks elsewhere', async () => {
    const artifacts = createArtifactStore();
    const { id } = await artifacts.put('fs__read_text_file', LOG);
    const needle = await artifacts.grep(id, 'FATAL.*needle', { context: 1 });
    expect(needle.total).toBe(1);
    expect(needle.matches[0]).toMatchObject({
      line: 12_345,
      text: expect.stringContaining('disk /dev/sdq failed'),
      before: [LOG.split('\n')[12_344]],
      after: [LOG.split('\n')[12_346]],
    });
    const errors = await artifacts.grep(id, 'ERROR .* code=5\\d2', { maxMatches: 5 });
    expect(errors.total).toBe(20);
    expect(errors.matches.map((match) => match.line)).toEqual([999, 1_999, 2_999, 3_999, 4_999]);
    // Catastrophic for a backtracking engine on lines of 'a's with no match; RE2 answers at once.
    const { id: hostile } = await artifacts.put('x', `${'a'.repeat(5_000)}!\n`.repeat(20));
    expect((await artifacts.grep(hostile, '^(a+)+$')).total).toBe(0);
  });

  it('shows each match in a long line as a window around it, with where it is, and counts several in one line as several', async () => {
    const artifacts = createArtifactStore();
    const answer = graphAnswer(5_000);
    // Kept as text, as it came: one line of ~700,000 characters.
    const { id } = await artifacts.put('grynya__query_graph', answer, 'text');
    const trace = `tr-${(4_321 * 7919).toString(16).padStart(8, '0')}`;
    const found = await artifacts.grep(id, trace);
    expect(found).toMatchObject({ total: 1, lines: 1 });
    const [match] = found.matches;
    const at = answer.indexOf(trace);
    expect(match).toMatchObject({ line: 0, window: { matchAt: at, fromChar: at - 150, length: answer.length } });
    expect(match?.text).toContain(`"trace_id": "${trace}", "message": "step 4321 of the night"`);
    expect(match?.text.length).toBeLessThan(400);
    const errors = await artifacts.grep(id, '"severity": "error"', { maxMatches: 3 });
    expect(errors.total).toBe(500);
    expect(errors.matches.map((one) => one.window?.matchAt)).toEqual([0, 1, 2].map((k) => nthIndexOf(answer, '"severity": "error"', k)));
    const short = await artifacts.grep((await artifacts.put('x', 'a b a b a\nb\n')).id, 'a');
    expect(short).toMatchObject({ total: 3, lines: 1, matches: [{ line: 0, text: 'a b a b a', count: 3 }] });
  });

  it('keeps a JSON answer as records, one per line after its envelope, and gives back the original byte for byte', async () => {
    const backend = createMemoryArtifacts();
    const artifacts = createArtifactStore({ backend });
    const answer = graphAnswer(3_000);
    const info = await artifacts.put('grynya__query_graph', answer);
    expect(info.records).toEqual({
      count: 3_000,
      firstLine: 1,
      path: ['results'],
      keys: ['e.id', 'e.label', 'e.service', 'e.severity', 'e.trace_id', 'e.message'],
      originalBytes: Buffer.byteLength(answer),
      // Every value of every record typed, as its table's columns are.
      types: { e: { id: 'VARCHAR', label: 'VARCHAR', service: 'VARCHAR', severity: 'VARCHAR', trace_id: 'VARCHAR', message: 'VARCHAR' } },
    });
    expect(info.lines).toBe(3_001);
    expect((await backend.load(info.id))?.original).toBe(answer);
    const page = await artifacts.read(info.id, { limit: 2 });
    expect(page.lines.map((line) => line.text)).toEqual([
      '{"status":"success","results":"[3000 records: lines 1-3000 of this artifact]"}',
      JSON.stringify(JSON.parse(answer).results[0]),
    ]);
    const trace = `tr-${(2_345 * 7919).toString(16).padStart(8, '0')}`;
    const found = await artifacts.grep(info.id, trace);
    expect(found.matches[0]).toMatchObject({ line: 2_346, text: expect.stringContaining('"message":"step 2345 of the night"') });
    // A bare array has no envelope; JSON without an array of objects, and text that only looks like JSON, stay as they are.
    expect((await artifacts.put('t', JSON.stringify([{ a: 1 }, { a: 2 }]))).records).toMatchObject({ count: 2, firstLine: 0, path: [], keys: ['a'] });
    expect(
      (
        await artifacts.put(
          't',
          JSON.stringify({
            rows: [
              [1, 2],
              [3, 4],
            ],
          }),
        )
      ).records,
    ).toBeUndefined();
    expect((await artifacts.put('t', '{"status": "success", "results": [')).records).toBeUndefined();
  });

  it('refuses bad input with an error the model can read, naming what was wrong', async () => {
    const artifacts = createArtifactStore({ maxBytes: 1_000_000 });
    const { id } = await artifacts.put('fs__read_text_file', 'one\ntwo\nthree\n');
    await expect(artifacts.read(id, { offset: 3 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: `\`offset\`: 3 is past the end of ${id}, which has 3 lines (0 to 2)`,
    });
    await expect(artifacts.read(id, { limit: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`limit`/) });
    await expect(artifacts.read(id, { offset: 1, charOffset: 3 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: '`char_offset`: expected a character of line 1 (0 to 2), got 3',
    });
    await expect(artifacts.grep(id, '(unclosed')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^`pattern`: .*missing closing \)/),
    });
    await expect(artifacts.grep(id, '(a)\\1')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`pattern`:/) });
    await expect(artifacts.read('art_000000000000')).rejects.toMatchObject({
      code: 'ARTIFACT_NOT_FOUND',
      message: `No artifact "art_000000000000" in this task: this task has ${id}`,
    });
    await expect(artifacts.put('fs__read_text_file', 'x'.repeat(1_000_000))).rejects.toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message: expect.stringMatching(/1000000-byte result of fs__read_text_file would pass the task's 1000000 bytes of artifacts \(14 kept\)/),
    });
    // Another store (another task's) does not know this one's artifacts.
    await expect(createArtifactStore().read(id)).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND' });
  });
});

function nthIndexOf(text: string, part: string, nth: number): number {
  let at = -1;
  for (let k = 0; k <= nth; k++) at = text.indexOf(part, at + 1);
  return at;
}

/** How a test's run keeps big results: in memory, from `thresholdTokens` on; `kept` lists what it kept. */
function keeping(thresholdTokens: number): ResultKeeping & { kept: string[] } {
  const kept: string[] = [];
  const pageTokens = Math.floor(thresholdTokens * 0.75);
  return {
    artifacts: createArtifactStore({ pageTokens }),
    thresholdTokens,
    pageTokens,
    countTokens: estimateTokens,
    onKept: (artifact) => void kept.push(artifact.id),
    kept,
  };
}

describe('keepBigResult', () => {
  it('keeps a result over the threshold as an artifact and gives the model its first line, size, first and last lines, and how to read it', async () => {
    const keep = keeping(1_000);
    // server-filesystem answers a file both as a text item and as structuredContent: kept once, not twice.
    const result: CallToolResult = { content: [{ type: 'text', text: LOG }], structuredContent: { content: LOG } };
    const kept = await keepBigResult('fs__read_text_file', result, keep);
    expect(keep.kept).toHaveLength(1);
    const [artifact] = await keep.artifacts.list();
    expect(artifact?.bytes).toBe(Buffer.byteLength(LOG));
    const text = (kept.content[0] as { text: string }).text;
    expect(kept.structuredContent).toBeUndefined();
    expect(text.split('\n')[0]).toBe(
      `artifact ${artifact?.id}: ${Buffer.byteLength(LOG).toLocaleString('en-US')} bytes, 20,000 lines, about ${estimateTokens(LOG).toLocaleString('en-US')} tokens (estimated) — the whole result of fs__read_text_file, kept out of this conversation because it is too big to send.`,
    );
    expect(text).toContain(`0: ${LOG.split('\n')[0]}`);
    expect(text).toContain(`19999: ${LOG.split('\n')[19_999]}`);
    expect(text).toContain('klym__read_artifact');
    expect(text.length).toBeLessThan(5_000);
    expect(text).toBe(artifactReference(artifact as NonNullable<typeof artifact>, (await keep.artifacts.lines(artifact?.id ?? '')).index));
  });

  it('tells the model that a JSON answer is records: how many, their keys, its table and columns', async () => {
    const keep = { ...keeping(1_000), query: { query: () => Promise.reject(new Error('not asked')) } };
    const kept = await keepBigResult('grynya__query_graph', { content: [{ type: 'text', text: graphAnswer(2_000) }] }, keep);
    const text = (kept.content[0] as { text: string }).text;
    const [artifact] = await keep.artifacts.list();
    expect(text).toContain(
      `It is JSON (${Buffer.byteLength(graphAnswer(2_000)).toLocaleString('en-US')} bytes as the tool gave it), kept as 2,000 records, one compact object per line (lines 1-2000); its records have keys e.id, e.label, e.service, e.severity, e.trace_id, e.message; line 0 holds the rest of the document, the array was at "results".`,
    );
    expect(text).toContain(
      `Query it with SQL as table ${artifact?.id}: columns n (the line number, as the line tools number it), e STRUCT("id" VARCHAR, "label" VARCHAR, "service" VARCHAR, "severity" VARCHAR, "trace_id" VARCHAR, "message" VARCHAR), one row per record, each column typed from every record's value.`,
    );
    expect(text).toContain(`klym__query_artifact { "sql": "SELECT … FROM ${artifact?.id} …" }`);
    // Every line of the preview is a whole record, not the first 300 characters of one line.
    expect(text).toContain(`1: ${JSON.stringify(JSON.parse(graphAnswer(1)).results[0])}`);
  });

  it('keeps a result that is only structuredContent as records too', async () => {
    const keep = keeping(1_000);
    const rows = Array.from({ length: 500 }, (_, n) => ({ id: n, service: `svc-${n % 7}`, ok: n % 3 !== 0 }));
    await keepBigResult('db__select', { content: [], structuredContent: { rows, next: null } }, keep);
    const [artifact] = await keep.artifacts.list();
    expect(artifact?.records).toMatchObject({ count: 500, firstLine: 1, path: ['rows'], keys: ['id', 'service', 'ok'] });
    expect((await keep.artifacts.read(artifact?.id as string, { offset: 1, limit: 1 })).lines[0]?.text).toBe(JSON.stringify(rows[0]));
  });

  it('leaves a small result, and an error result, as they are', async () => {
    const keep = keeping(1_000);
    const small: CallToolResult = { content: [{ type: 'text', text: 'ok' }] };
    expect(await keepBigResult('t', small, keep)).toBe(small);
    const failed: CallToolResult = { isError: true, content: [{ type: 'text', text: LOG }] };
    expect(await keepBigResult('t', failed, keep)).toBe(failed);
    expect(keep.kept).toEqual([]);
  });

  it('offers klym__read_artifact, whose pages are never artifacts, even at its documented maximum, and klym__grep_artifact', async () => {
    const keep = keeping(2_000);
    const { id } = await keep.artifacts.put('fs__read_text_file', LOG);
    const run = runner(keep);
    const read = await run('klym__read_artifact', { artifact: id, offset: 12_345, limit: 1 });
    expect(read).toBe(
      `artifact ${id}, lines 12345-12345 of 20,000 (line: text; 0-based; a part of a long line is shown as line[from-to of length]):\n12345: ${LOG.split('\n')[12_345]}\n… lines 12346 to 19999 follow: read on with "offset": 12346.`,
    );
    const most = await run('klym__read_artifact', { artifact: id, offset: 100, limit: 500 });
    expect(most).toMatch(/^artifact art_[0-9a-f]{12}, lines 100-\d+ of 20,000/);
    expect(estimateTokens(most)).toBeLessThan(2_000);
    const goOn = Number(/read on with "offset": (\d+)\.$/.exec(most)?.[1]);
    expect(most).toContain(`${goOn - 1}: ${LOG.split('\n')[goOn - 1]}`);
    const grep = await run('klym__grep_artifact', { artifact: id, pattern: 'needle' });
    expect(grep).toBe(
      `artifact ${id}: 1 match of "needle" among its 20,000 lines (line: text; 0-based; in a long line, line[from-to of length] around each match):\n12345: ${LOG.split('\n')[12_345]}`,
    );
    const many = await run('klym__grep_artifact', { artifact: id, pattern: 'INFO', max_matches: 500, context: 2 });
    expect(many).toMatch(/^artifact art_[0-9a-f]{12}: .* the whole result of klym__grep_artifact/);
    expect(keep.kept).toHaveLength(1);
  });
});

describe('klym__read_artifact through a 20-million-character line', () => {
  it('tokenizes a bounded multiple of the line, never its whole rest per page, and gives every character once', async () => {
    const line = 'the quick brown fox — jumps over 🦊 the lazy dog, é; '.repeat(400_000).slice(0, 20_000_000);
    let counted = 0;
    const countTokens = (text: string): number => {
      counted += text.length;
      return estimateTokens(text);
    };
    const artifacts = createArtifactStore({ countTokens, pageTokens: 8_000 });
    const { id } = await artifacts.put('grynya__query_graph', `${line}\n`, 'text');
    const run = runner({ artifacts, thresholdTokens: 8_000, pageTokens: 8_000, countTokens });
    counted = 0;
    const parts: string[] = [];
    let read = 0;
    let charOffset: number | undefined = 0;
    while (charOffset !== undefined) {
      const page = await run('klym__read_artifact', { artifact: id, char_offset: charOffset });
      const [, from, text = ''] = /^0\[chars (\d+)-\d+ of 20000000\]: (.*)$/m.exec(page) ?? [];
      expect(Number(from)).toBe(charOffset);
      parts.push(text);
      read += text.length;
      const goOn = /"char_offset": (\d+)\.$/.exec(page)?.[1];
      charOffset = goOn === undefined ? undefined : Number(goOn);
      // Each page counts about a page's worth: the old reader counted the whole rest of the line on the first.
      expect(counted).toBeLessThanOrEqual(16 * (read + 8_000 * 16));
    }
    expect(parts.join('')).toBe(line);
    expect(parts.length).toBeGreaterThan(100);
    // ~5.4 × the line in all (108 million characters), where counting each page's rest cost ~400 × (8 billion).
    expect(counted).toBeLessThanOrEqual(8 * line.length);
    console.log(`klym__read_artifact: ${parts.length} pages of a 20,000,000-character line tokenized ${counted.toLocaleString('en-US')} characters`);
  });
});

describe('klym__map_artifact', () => {
  it('answers on every chunk in order with its line range, and refuses an unknown artifact as a tool error', async () => {
    const keep: ResultKeeping = {
      ...keeping(100_000),
      // A tiny window: chunks of a few hundred lines, each answered with how many lines it saw.
      mapping: {
        model: createScriptedModel({ steps: ({ options }) => ({ text: `${(JSON.stringify(options.prompt).match(/\\n\d+: /g) ?? []).length} lines` }) }),
        streams: false,
        windowTokens: 20_000,
        concurrency: 3,
        countTokens: estimateTokens,
        maxRetries: 0,
        signal: new AbortController().signal,
      },
    };
    const { id } = await keep.artifacts.put('fs__read_text_file', LOG);
    const execute = artifactTools(keep)['klym__map_artifact']?.execute as (input: unknown, options: unknown) => Promise<string>;
    const mapped = await execute({ artifact: id, instruction: 'How many lines?' }, { toolCallId: 'c1', messages: [] });
    const ranges = [...mapped.matchAll(/\[lines (\d+)-(\d+)\] (\d+) lines/g)].map((match) => [Number(match[1]), Number(match[2]), Number(match[3])]);
    expect(ranges.length).toBeGreaterThan(3);
    expect(ranges[0]?.[0]).toBe(0);
    expect(ranges.at(-1)?.[1]).toBe(19_999);
    // Each chunk's model saw exactly its range's lines, and each range starts where the one before ended.
    expect(ranges.map(([from, to, seen]) => seen === (to as number) - (from as number) + 1)).not.toContain(false);
    expect(ranges.slice(1).map(([from], index) => from === (ranges[index]?.[1] as number) + 1)).not.toContain(false);
    await expect(execute({ artifact: 'art_000000000000', instruction: 'x' }, { toolCallId: 'c2', messages: [] })).rejects.toMatchObject({
      code: 'ARTIFACT_NOT_FOUND',
    });
  });
});
