import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundedLog } from './task-log.ts';

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2, estimated: false };

describe('BoundedLog', () => {
  it('numbers entries and pages through them with a cursor', () => {
    const log = new BoundedLog();
    for (let index = 0; index < 7; index++) log.append('step-start', { step: index });
    const first = log.read(0, 3);
    expect(first.entries.map((entry) => entry.seq)).toEqual([1, 2, 3]);
    expect(first).toMatchObject({ nextCursor: 3, lastSeq: 7, more: true, dropped: 0 });
    const second = log.read(first.nextCursor, 10);
    expect(second.entries.map((entry) => entry.seq)).toEqual([4, 5, 6, 7]);
    expect(second).toMatchObject({ nextCursor: 7, more: false });
    expect(log.read(7, 10)).toMatchObject({ entries: [], nextCursor: 7, more: false });
    expect(log.tail(2).entries.map((entry) => entry.seq)).toEqual([6, 7]);
  });

  it('stays within its byte bound by dropping the oldest entries, and marks the gap', () => {
    const log = new BoundedLog({ maxBytes: 2_000, maxEntryBytes: 200 });
    for (let index = 0; index < 10_000; index++)
      log.append('upstream-log', { upstream: 'u', source: 'stderr', level: 'info', message: `line ${index} ${'x'.repeat(50)}` });
    expect(log.bytes).toBeLessThanOrEqual(2_000);
    const page = log.read(0, 5);
    expect(page.dropped).toBeGreaterThan(9_900);
    expect(page.droppedBefore).toEqual({ fromSeq: 1, toSeq: (page.entries[0]?.seq ?? 0) - 1 });
    expect(page.entries[0]?.data).toMatchObject({ message: expect.stringMatching(/^line \d+ x+$/) });
    expect(log.tail(1).entries[0]?.seq).toBe(10_000);
  });

  it('cuts one oversized entry instead of letting it take the whole log', () => {
    const log = new BoundedLog({ maxBytes: 10_000, maxEntryBytes: 500 });
    const entry = log.append('llm-response', { step: 1, finishReason: 'stop', usage, text: 'y'.repeat(100_000) });
    expect(Buffer.byteLength(JSON.stringify(entry.data))).toBeLessThanOrEqual(500);
    expect(entry.type === 'llm-response' && entry.data.text.endsWith('…')).toBe(true);
  });

  it('counts each entry at the UTF-8 length of its JSON, whatever its text', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ unit: 'binary' }), fc.dictionary(fc.string(), fc.jsonValue())), { minLength: 1, maxLength: 8 }), (appends) => {
        const log = new BoundedLog({ maxBytes: 1e9, maxEntryBytes: 1e9 });
        const entries = appends.map(([text, args]) => log.append('tool-call', { step: 1, toolCallId: text, toolName: text, args }));
        expect(log.bytes).toBe(entries.reduce((total, entry) => total + Buffer.byteLength(JSON.stringify(entry)), 0));
      }),
    );
  });
});
