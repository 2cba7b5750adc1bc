import { describe, expect, it } from 'vitest';
import { createMemoryArtifacts } from './artifact-store.ts';
import type { StoredArtifact } from './artifact-types.ts';
import { SLICE_CHARS } from './query-tables.ts';
import { openQueryText, type QueryText } from './query-text.ts';

/** Every slice `text` gives, read as a query process reads them. */
async function slices(text: QueryText): Promise<string[]> {
  const read: string[] = [];
  for (let from = 0; from < text.chars;) {
    const slice = await text.read(from);
    read.push(slice.text);
    from = slice.end;
  }
  return read;
}

const artifact = (text: string): StoredArtifact => ({
  id: 'art_0123456789ab',
  tool: 'files__read_text_file',
  bytes: Buffer.byteLength(text),
  lines: text.split('\n').length,
  tokens: 1,
  createdAt: '2026-11-28T00:00:00.000Z',
  text,
});

/** A line of 2-, 3- and 4-byte characters. */
const line = (n: number): string => `${n} é€😀 ${'x'.repeat(n % 50)}`;

describe('openQueryText', () => {
  // Lines over several slices, one line longer than a slice, a last newline.
  const lines = [...Array.from({ length: 200_000 }, (_, n) => line(n)), 'y€'.repeat(SLICE_CHARS), ...Array.from({ length: 1_000 }, (_, n) => line(n))];
  const text = `${lines.join('\n')}\n`;

  it('gives a store’s text a range of bytes at a time as the same lines as the text in memory, never cutting a line or a character', async () => {
    const kept = artifact(text);
    const backend = createMemoryArtifacts();
    await backend.save(kept);
    const ranges: [number, number][] = [];
    const ranged = await openQueryText(
      {
        load: () => Promise.reject(new Error('a ranged source is not loaded whole')),
        list: backend.list,
        loadRange: async (_id, start, end) => {
          ranges.push([start, end]);
          return Buffer.from(text).subarray(start, end);
        },
      },
      kept.id,
    );
    const whole = await openQueryText(backend, kept.id);
    expect(ranged?.chars).toBe(kept.bytes - 1);
    const [fromStore, fromMemory] = [await slices(ranged as QueryText), await slices(whole as QueryText)];
    expect(fromStore.join('\n')).toBe(lines.join('\n'));
    expect(fromMemory.join('\n')).toBe(lines.join('\n'));
    // A slice of whole lines at a time, the long line whole in one; no range past a slice's size.
    expect(fromStore.length).toBeGreaterThan(3);
    expect(fromStore).toContain('y€'.repeat(SLICE_CHARS));
    expect(Math.max(...ranges.map(([start, end]) => end - start))).toBeLessThanOrEqual(SLICE_CHARS);
  });

  it('says a task has no such artifact, and fails when the store loses its text', async () => {
    const source = { load: async () => undefined, list: async () => [artifact(text)], loadRange: async () => undefined };
    await expect(openQueryText(source, 'art_ffffffffffff')).resolves.toBeUndefined();
    await expect(openQueryText(source, 'art_0123456789ab')).rejects.toThrow(/no longer in the task's store/);
  });
});
