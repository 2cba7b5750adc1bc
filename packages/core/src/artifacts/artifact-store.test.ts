import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createScriptedModel } from '../agent/scripted-model.ts';
import { estimateTokens } from '../agent/token-count.ts';
import { createArtifactStore } from './artifact-store.ts';
import { artifactReference, artifactTools, keepBigResult, type ResultKeeping } from './artifact-tools.ts';

/** A log of `lines` lines, with `ERROR … code=5xx` on every 1000th and a needle on line `needleAt`. */
function log(lines: number, needleAt: number): string {
  const out: string[] = [];
  for (let n = 0; n < lines; n++) {
    if (n === needleAt) out.push(`2026-11-25T03:14:15.${String(n % 1000).padStart(3, '0')}Z svc-7 FATAL the needle: disk /dev/sdq failed`);
    else if (n % 1000 === 999) out.push(`2026-11-25T03:14:15.${String(n % 1000).padStart(3, '0')}Z svc-${n % 13} ERROR request failed code=5${n % 10}2 id=${n.toString(16)}`);
    else out.push(`2026-11-25T03:14:15.${String(n % 1000).padStart(3, '0')}Z svc-${n % 13} INFO request ok code=200 id=${n.toString(16)}`);
  }
  return `${out.join('\n')}\n`;
}

const LOG = log(20_000, 12_345);

describe('createArtifactStore', () => {
  it('keeps a text whole and counts its bytes, lines and tokens; reads it by slices of lines', async () => {
    const artifacts = createArtifactStore();
    const info = await artifacts.put('fs__read_text_file', LOG);
    expect(info).toMatchObject({ id: expect.stringMatching(/^art_[0-9a-f]{12}$/), tool: 'fs__read_text_file', bytes: Buffer.byteLength(LOG), lines: 20_000, tokens: estimateTokens(LOG) });
    const slice = await artifacts.read(info.id, 12_344, 3);
    expect(slice.lines).toEqual(LOG.split('\n').slice(12_344, 12_347));
    expect(slice).toMatchObject({ offset: 12_344, more: true });
    const end = await artifacts.read(info.id, 19_998);
    expect(end).toMatchObject({ lines: LOG.split('\n').slice(19_998, 20_000), more: false });
    expect((await artifacts.list()).map((artifact) => artifact.id)).toEqual([info.id]);
  });

  it('greps in linear time: the needle with its line number and context, counts past max_matches, and a pattern that backtracks elsewhere', async () => {
    const artifacts = createArtifactStore();
    const { id } = await artifacts.put('fs__read_text_file', LOG);
    const needle = await artifacts.grep(id, 'FATAL.*needle', { context: 1 });
    expect(needle.total).toBe(1);
    expect(needle.matches[0]).toMatchObject({ line: 12_345, text: expect.stringContaining('disk /dev/sdq failed'), before: [LOG.split('\n')[12_344]], after: [LOG.split('\n')[12_346]] });
    const errors = await artifacts.grep(id, 'ERROR .* code=5\\d2', { maxMatches: 5 });
    expect(errors.total).toBe(20);
    expect(errors.matches.map((match) => match.line)).toEqual([999, 1_999, 2_999, 3_999, 4_999]);
    // Catastrophic for a backtracking engine on lines of 'a's with no match; RE2 answers at once.
    const { id: hostile } = await artifacts.put('x', `${'a'.repeat(5_000)}!\n`.repeat(20));
    expect((await artifacts.grep(hostile, '^(a+)+$')).total).toBe(0);
  });

  it('refuses bad input with an error the model can read, naming what was wrong', async () => {
    const artifacts = createArtifactStore({ maxBytes: 1_000_000 });
    const { id } = await artifacts.put('fs__read_text_file', 'one\ntwo\nthree\n');
    await expect(artifacts.read(id, 3)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: `\`offset\`: 3 is past the end of ${id}, which has 3 lines (0 to 2)` });
    await expect(artifacts.read(id, 0, 0)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`limit`/) });
    await expect(artifacts.grep(id, '(unclosed')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`pattern`: .*missing closing \)/) });
    await expect(artifacts.grep(id, '(a)\\1')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^`pattern`:/) });
    await expect(artifacts.read('art_000000000000')).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND', message: `No artifact "art_000000000000" in this task: this task has ${id}` });
    await expect(artifacts.put('fs__read_text_file', 'x'.repeat(1_000_000))).rejects.toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message: expect.stringMatching(/1000000-byte result of fs__read_text_file would pass the task's 1000000 bytes of artifacts \(14 kept\)/),
    });
    // Another store (another task's) does not know this one's artifacts.
    await expect(createArtifactStore().read(id)).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND' });
  });
});

/** How a test's run keeps big results: in memory, from `thresholdTokens` on; `kept` lists what it kept. */
function keeping(thresholdTokens: number): ResultKeeping & { kept: string[] } {
  const kept: string[] = [];
  return { artifacts: createArtifactStore(), thresholdTokens, countTokens: estimateTokens, onKept: (artifact) => void kept.push(artifact.id), kept };
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
      `artifact ${artifact?.id}: ${Buffer.byteLength(LOG).toLocaleString('en-US')} bytes, 20,000 lines, ${estimateTokens(LOG).toLocaleString('en-US')} tokens — the whole result of fs__read_text_file, kept out of this conversation because it is too big to send.`,
    );
    expect(text).toContain(`0: ${LOG.split('\n')[0]}`);
    expect(text).toContain(`19999: ${LOG.split('\n')[19_999]}`);
    expect(text).toContain('klym__read_artifact');
    expect(text.length).toBeLessThan(5_000);
    expect(text).toBe(artifactReference(artifact as NonNullable<typeof artifact>, LOG));
  });

  it('leaves a small result, and an error result, as they are', async () => {
    const keep = keeping(1_000);
    const small: CallToolResult = { content: [{ type: 'text', text: 'ok' }] };
    expect(await keepBigResult('t', small, keep)).toBe(small);
    const failed: CallToolResult = { isError: true, content: [{ type: 'text', text: LOG }] };
    expect(await keepBigResult('t', failed, keep)).toBe(failed);
    expect(keep.kept).toEqual([]);
  });

  it("offers klym__read_artifact and klym__grep_artifact, whose own big answers become artifacts too", async () => {
    const keep = keeping(2_000);
    const { id } = await keep.artifacts.put('fs__read_text_file', LOG);
    const tools = artifactTools(keep);
    const run = (name: string, input: unknown): Promise<string> => {
      const execute = tools[name]?.execute as ((input: unknown, options: unknown) => Promise<string>) | undefined;
      if (execute === undefined) throw new Error(`No tool ${name}`);
      return execute(input, { toolCallId: 'c1', messages: [] });
    };
    const read = await run('klym__read_artifact', { artifact: id, offset: 12_345, limit: 1 });
    expect(read).toBe(`artifact ${id}, lines 12345-12345 of 20,000 (line: text; 0-based):\n12345: ${LOG.split('\n')[12_345]}\n… lines 12346 to 19999 follow: read on with "offset": 12346.`);
    const grep = await run('klym__grep_artifact', { artifact: id, pattern: 'needle' });
    expect(grep).toBe(`artifact ${id}: 1 of its 20,000 lines match "needle" (line: text; 0-based):\n12345: ${LOG.split('\n')[12_345]}`);
    const many = await run('klym__grep_artifact', { artifact: id, pattern: 'INFO', max_matches: 500, context: 2 });
    expect(many).toMatch(/^artifact art_[0-9a-f]{12}: .* the whole result of klym__grep_artifact/);
    expect(keep.kept).toHaveLength(1);
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
    await expect(execute({ artifact: 'art_000000000000', instruction: 'x' }, { toolCallId: 'c2', messages: [] })).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND' });
  });
});
