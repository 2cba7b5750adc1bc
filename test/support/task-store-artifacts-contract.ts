import type { TaskStore } from '@klym/core';
import type { ArtifactLimits } from '@klym/core/artifacts';
import { expect, it } from 'vitest';
import { artifactOf, taskRecord } from './task-fixtures.ts';

/**
 * The artifact part of the {@link TaskStore} contract (`describeTaskStoreContract`), registered inside its
 * `describe`: artifacts kept whole with their records, capped per task atomically, and past the store's cap
 * the artifacts of the task that finished first given way.
 */
export function describeArtifactContract(open: () => Promise<TaskStore>, openCapped: (artifacts: ArtifactLimits) => Promise<TaskStore>): void {
  it("keeps a task's artifacts whole, lists them without their text, and evicts them with their task", async () => {
    await using store = await open();
    await store.insert(taskRecord('t1', { status: 'running' }));
    await store.insert(taskRecord('t2', { status: 'running' }));
    const text = `${'2026-11-25T03:14:15.926Z svc-7 INFO ok é ✓\n'.repeat(30_000)}last line without newline`;
    const artifact = {
      id: 'art_00000000000a',
      tool: 'fs__read_text_file',
      bytes: Buffer.byteLength(text),
      lines: 30_001,
      tokens: 600_000,
      createdAt: '2026-01-01T00:00:01.000Z',
      text,
    };
    const second = {
      ...artifact,
      id: 'art_00000000000b',
      tool: 'klym__grep_artifact',
      text: 'one match',
      bytes: 9,
      lines: 1,
      tokens: 3,
      createdAt: '2026-01-01T00:00:02.000Z',
    };
    await store.saveArtifact('t1', artifact);
    await store.saveArtifact('t1', second);
    expect(await store.loadArtifact('t1', artifact.id)).toEqual(artifact);
    const { text: _text, ...info } = artifact;
    const { text: _second, ...secondInfo } = second;
    expect(await store.listArtifacts('t1')).toEqual([info, secondInfo]);
    // Another task's artifact is not this task's; a task no longer kept keeps nothing.
    expect(await store.loadArtifact('t2', artifact.id)).toBeUndefined();
    expect(await store.listArtifacts('t2')).toEqual([]);
    await store.saveArtifact('missing', artifact);
    expect(await store.listArtifacts('missing')).toEqual([]);
    await store.transition('t1', ['running'], { status: 'completed', finishedAt: '2026-01-01T00:00:00.000Z' });
    expect(await store.loadArtifact('t1', second.id)).toEqual(second);
    expect(await store.artifactBytes()).toBe(artifact.bytes + second.bytes);
    await store.evict(new Date('2026-01-01T01:00:00.000Z'));
    expect(await store.loadArtifact('t1', artifact.id)).toBeUndefined();
    expect(await store.listArtifacts('t1')).toEqual([]);
    expect(await store.artifactBytes()).toBe(0);
  });

  it("gives a byte range of an artifact's text, exactly those bytes, cut characters included, and nothing of another task's", async () => {
    await using store = await open();
    await store.insert(taskRecord('t1', { status: 'running' }));
    await store.insert(taskRecord('t2', { status: 'running' }));
    // ASCII, two-, three- and four-byte characters, past several of the memory store's marks.
    const text = `${'svc-7 ok é ✓ 🦊 done\n'.repeat(20_000)}last line 🦊`;
    const bytes = Buffer.from(text);
    await store.saveArtifact('t1', artifactOf('art_00000000000a', text));
    await store.saveArtifact('t1', artifactOf('art_00000000000b', 'plain ascii\nlines'));
    const range = async (start: number, end: number, id = 'art_00000000000a'): Promise<Buffer | undefined> => {
      const part = await store.loadArtifactRange('t1', id, start, end);
      return part === undefined ? undefined : Buffer.from(part);
    };
    for (const [start, end] of [
      [0, 10],
      [12, 13], // inside a four-byte character
      [9, 200_000],
      [bytes.length - 7, bytes.length],
      [bytes.length - 3, bytes.length + 100],
      [300_001, 300_001],
    ] as const) {
      expect(await range(start, end), `bytes ${start}-${end}`).toEqual(bytes.subarray(start, end));
    }
    expect((await range(bytes.length + 5, bytes.length + 9))?.length).toBe(0);
    expect(await range(6, 11, 'art_00000000000b')).toEqual(Buffer.from('ascii'));
    expect(await store.loadArtifactRange('t2', 'art_00000000000a', 0, 10)).toBeUndefined();
    expect(await store.loadArtifactRange('t1', 'art_000000000000', 0, 10)).toBeUndefined();
    await store.transition('t1', ['running'], { status: 'completed', finishedAt: '2026-01-01T00:00:00.000Z' });
    await store.evict(new Date('2026-01-01T01:00:00.000Z'));
    expect(await store.loadArtifactRange('t1', 'art_00000000000a', 0, 10)).toBeUndefined();
  });

  it("keeps an artifact's records, and its original JSON byte for byte, which a list never carries", async () => {
    await using store = await open();
    await store.insert(taskRecord('t1', { status: 'running' }));
    const original = '{ "status": "success",\n  "results": [ {"id": 1, "label": "é"}, {"id": 2, "label": "✓"} ] }';
    const lines = '{"status":"success","results":"[2 records: lines 1-2 of this artifact]"}\n{"id":1,"label":"é"}\n{"id":2,"label":"✓"}';
    const records = { count: 2, firstLine: 1, path: ['results'], keys: ['id', 'label'], originalBytes: Buffer.byteLength(original) };
    const json = artifactOf('art_00000000000a', lines, { tool: 'grynya__query_graph', records, original });
    const plain = artifactOf('art_00000000000b', 'plain text', { createdAt: '2026-01-01T00:00:02.000Z' });
    await store.saveArtifact('t1', json);
    await store.saveArtifact('t1', plain);
    expect(await store.loadArtifact('t1', json.id)).toEqual(json);
    expect((await store.loadArtifact('t1', json.id))?.original).toBe(original);
    const loaded = await store.loadArtifact('t1', plain.id);
    expect(loaded).toEqual(plain);
    expect(loaded !== undefined && 'original' in loaded).toBe(false);
    const listed = await store.listArtifacts('t1');
    const { text: _text, original: _original, ...info } = json;
    const { text: _plainText, ...plainInfo } = plain;
    expect(listed).toEqual([info, plainInfo]);
    expect(listed.map((one) => Object.keys(one).filter((key) => key === 'text' || key === 'original'))).toEqual([[], []]);
    // The original is kept too, so it counts.
    expect(await store.artifactBytes()).toBe(json.bytes + records.originalBytes + plain.bytes);
  });

  it("caps a task's artifacts atomically: of two saves at once of which one fits, one is kept", async () => {
    await using store = await openCapped({ maxBytesPerTask: 1_000 });
    await store.insert(taskRecord('t1', { status: 'running' }));
    await store.insert(taskRecord('t2', { status: 'running' }));
    await store.saveArtifact('t1', artifactOf('art_00000000000a', 'x'.repeat(300)));
    const racing = ['art_00000000000b', 'art_00000000000c'].map((id) =>
      store.saveArtifact('t1', artifactOf(id, 'y'.repeat(600), { tool: 'grynya__query_graph', createdAt: '2026-01-01T00:00:02.000Z' })),
    );
    const settled = await Promise.allSettled(racing);
    expect(settled.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    const [refused] = settled.filter((outcome) => outcome.status === 'rejected');
    expect(refused?.reason).toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message: "Keeping this 600-byte result of grynya__query_graph would pass the task's 1000 bytes of artifacts (900 kept)",
    });
    expect((await store.listArtifacts('t1')).map((one) => one.bytes)).toEqual([300, 600]);
    // A record artifact counts its original too: 50 + 60 more would pass 1,000.
    const records = { count: 1, firstLine: 0, path: [], keys: ['a'], originalBytes: 60 };
    await expect(store.saveArtifact('t1', artifactOf('art_00000000000d', 'z'.repeat(50), { records, original: 'o'.repeat(60) }))).rejects.toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message: expect.stringContaining('this 110-byte result'),
    });
    await store.saveArtifact('t1', artifactOf('art_00000000000e', 'z'.repeat(50), { records: { ...records, originalBytes: 0 } }));
    // Another task has a cap of its own.
    await store.saveArtifact('t2', artifactOf('art_00000000000f', 'w'.repeat(1_000)));
    expect(await store.artifactBytes()).toBe(1_950);
  });

  it("past the store's cap, drops the artifacts of the task that finished first, keeps running tasks', and refuses when only theirs are left", async () => {
    await using store = await openCapped({ maxBytes: 1_000 });
    for (const id of ['first-started', 'first-finished', 'running', 'another']) await store.insert(taskRecord(id, { status: 'running' }));
    await store.saveArtifact('first-started', artifactOf('art_00000000000a', 'a'.repeat(300)));
    await store.saveArtifact('first-finished', artifactOf('art_00000000000b', 'b'.repeat(200)));
    await store.saveArtifact('first-finished', artifactOf('art_00000000000c', 'c'.repeat(100)));
    await store.saveArtifact('running', artifactOf('art_00000000000d', 'd'.repeat(300)));
    await store.transition('first-started', ['running'], { status: 'completed', finishedAt: '2026-01-01T00:20:00.000Z' });
    await store.transition('first-finished', ['running'], { status: 'error', finishedAt: '2026-01-01T00:10:00.000Z' });
    expect(await store.artifactBytes()).toBe(900);

    // 900 + 300 > 1,000: the task that finished first loses its artifacts, both of them, and nothing else does.
    await store.saveArtifact('running', artifactOf('art_00000000000e', 'e'.repeat(300), { createdAt: '2026-01-01T00:00:02.000Z' }));
    expect(await store.listArtifacts('first-finished')).toEqual([]);
    expect(await store.loadArtifact('first-finished', 'art_00000000000b')).toBeUndefined();
    expect(await store.get('first-finished')).toMatchObject({ status: 'error', finishedAt: '2026-01-01T00:10:00.000Z' });
    expect((await store.listArtifacts('first-started')).map((one) => one.id)).toEqual(['art_00000000000a']);
    expect((await store.listArtifacts('running')).map((one) => one.id)).toEqual(['art_00000000000d', 'art_00000000000e']);
    expect(await store.artifactBytes()).toBe(900);

    // Dropping every finished task's artifacts (300) would not make room for 500: refused, and nothing dropped.
    await expect(store.saveArtifact('another', artifactOf('art_00000000000f', 'f'.repeat(500)))).rejects.toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message:
        "Keeping this 500-byte result of fs__read_text_file would pass the task store's 1000 bytes of artifacts (900 kept, 600 of them by tasks not finished yet, which are never dropped)",
    });
    expect((await store.listArtifacts('first-started')).map((one) => one.id)).toEqual(['art_00000000000a']);

    await store.saveArtifact('another', artifactOf('art_000000000010', 'g'.repeat(400)));
    expect(await store.listArtifacts('first-started')).toEqual([]);
    expect(await store.artifactBytes()).toBe(1_000);
    // Only running tasks hold artifacts now: the next is refused, and theirs are all still readable.
    await expect(store.saveArtifact('running', artifactOf('art_000000000011', 'h'))).rejects.toMatchObject({
      code: 'ARTIFACT_LIMIT',
      message: expect.stringContaining("would pass the task store's 1000 bytes of artifacts (1000 kept, 1000 of them by tasks not finished yet"),
    });
    expect((await store.loadArtifact('running', 'art_00000000000d'))?.text).toBe('d'.repeat(300));
    expect((await store.loadArtifact('another', 'art_000000000010'))?.text).toBe('g'.repeat(400));

    // An evicted task's artifacts leave the count with it; a task that finishes becomes the next to give way.
    await store.transition('running', ['running'], { status: 'cancelled', finishedAt: '2026-01-01T00:30:00.000Z' });
    await store.saveArtifact('another', artifactOf('art_000000000012', 'i'.repeat(100)));
    expect(await store.listArtifacts('running')).toEqual([]);
    expect(await store.artifactBytes()).toBe(500);
  });
}
