import { describe, expect, it } from 'vitest';
import { createMemoryTaskStore } from '../tasks/store/memory-task-store.ts';
import { createArtifactReader } from './artifact-reader.ts';
import { createArtifactStore, type ArtifactSlice, type ReadRequest } from './artifact-store.ts';

/** Every page of an artifact, following `next` from the first. */
async function pages(read: (request: ReadRequest) => Promise<ArtifactSlice>, pageTokens: number): Promise<ArtifactSlice[]> {
  const out: ArtifactSlice[] = [];
  let request: ReadRequest | undefined = { pageTokens };
  while (request !== undefined) {
    const page = await read(request);
    out.push(page);
    request =
      page.next === undefined
        ? undefined
        : { offset: page.next.offset, ...(page.next.charOffset === undefined ? {} : { charOffset: page.next.charOffset }), pageTokens };
  }
  return out;
}

const TEXTS = {
  'short lines, CRLF, empty ones, a newline at the end': 'alpha\r\nbeta é\n\n✓ gamma 🦊\r\n\n'.repeat(3_000),
  'long lines of two-, three- and four-byte characters among short ones': `head\n${'é✓🦊 word '.repeat(40_000)}\r\nmiddle\n${'x'.repeat(300_000)}\ntail 🦊`,
  'one line, no newline': 'only line, é',
  empty: '',
};

describe('createArtifactReader', () => {
  it('pages exactly as a store holding the whole text does, loading by ranges', async () => {
    for (const [name, text] of Object.entries(TEXTS)) {
      for (const pageTokens of [100, 2_000]) {
        await using store = createMemoryTaskStore();
        await store.insert({
          id: 't1',
          principal: 'p',
          request: { prompt: 'x' },
          status: 'running',
          createdAt: '2026-01-01T00:00:00.000Z',
          currentStep: 'x',
          usage: { steps: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: undefined },
        });
        const whole = createArtifactStore({
          backend: {
            save: (artifact) => store.saveArtifact('t1', artifact),
            load: (id) => store.loadArtifact('t1', id),
            list: () => store.listArtifacts('t1'),
          },
        });
        const { id } = await whole.put('fs__read_text_file', text, 'text');
        const reader = createArtifactReader({
          list: () => store.listArtifacts('t1'),
          loadRange: (artifactId, start, end) => store.loadArtifactRange('t1', artifactId, start, end),
        });
        const expected = await pages((request) => whole.read(id, request), pageTokens);
        expect(await pages((request) => reader.read(id, request), pageTokens), `${name}, pages of ${pageTokens} tokens`).toEqual(expected);
        // A page from the middle of a long line, and the refusals, are the store's too.
        // A page from the middle of a line (a long one where there is one), as the store gives it.
        const middle = text.includes('x'.repeat(300_000)) ? { offset: 1, charOffset: 123_457, pageTokens } : { pageTokens };
        expect(await reader.read(id, middle)).toEqual(await whole.read(id, middle));
        for (const bad of [{ offset: 1e9 }, { offset: 0, charOffset: 1e9 }, { limit: 0 }, { charOffset: -1 }]) {
          const refusal = await whole.read(id, bad).then(
            () => undefined,
            (error: Error) => error.message,
          );
          expect(refusal, `${name}: ${JSON.stringify(bad)}`).toBeDefined();
          await expect(reader.read(id, bad)).rejects.toThrow(refusal);
        }
      }
    }
  });

  it('names the task’s artifacts for an unknown one, and one dropped since it was indexed', async () => {
    let gone = false;
    const reader = createArtifactReader({
      list: async () => (gone ? [] : [{ id: 'art_00000000000a', tool: 't', bytes: 5, lines: 1, tokens: 1, createdAt: '2026-01-01T00:00:00.000Z' }]),
      loadRange: async (_id, start, end) => (gone ? undefined : Buffer.from('hello').subarray(start, end)),
    });
    expect((await reader.read('art_00000000000a')).lines).toEqual([{ n: 0, text: 'hello' }]);
    await expect(reader.read('art_00000000000b')).rejects.toMatchObject({
      code: 'ARTIFACT_NOT_FOUND',
      message: expect.stringContaining('this task has art_00000000000a'),
    });
    gone = true;
    await expect(reader.read('art_00000000000a')).rejects.toMatchObject({ code: 'ARTIFACT_NOT_FOUND', message: expect.stringContaining('this task has none') });
  });
});
