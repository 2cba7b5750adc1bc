import type { ArtifactInfo, ArtifactRecords, StoredArtifact } from './artifact-types.ts';
import { SLICE_CHARS, sliceOfLines, type LineSlice } from './query-tables.ts';

/** What a query reads its tables from: the task's artifacts. */
export interface QuerySource {
  /** The artifact with its text (read whole when the source has no `loadRange`); `undefined` for an id the task has not. */
  load(id: string): Promise<StoredArtifact | undefined>;
  /** Every artifact of the task, without their text. */
  list(): Promise<readonly ArtifactInfo[]>;
  /**
   * Bytes `start` to `end` of an artifact's text (a task store's `loadArtifactRange`). Given it, a table is
   * loaded from the store a slice at a time: the serving process never holds the artifact's text whole for a
   * query, nor its original (which `load` reads too).
   */
  loadRange?(id: string, start: number, end: number): Promise<Uint8Array | undefined>;
}

/**
 * An artifact's text as a query process loads it: its length (its last newline left out) in the positions
 * `read` counts — characters of a text in memory, bytes of a store's — and its slices of whole lines.
 */
export interface QueryText {
  readonly chars: number;
  readonly records?: ArtifactRecords;
  readonly json?: 'document';
  readonly read: (from: number) => Promise<LineSlice>;
}

/** Artifact `id`'s text for a query process; `undefined` when the task has no such artifact. */
export async function openQueryText(source: QuerySource, id: string): Promise<QueryText | undefined> {
  const { loadRange } = source;
  if (loadRange === undefined) {
    const artifact = await source.load(id);
    if (artifact === undefined) return undefined;
    const text = artifact.text.endsWith('\n') ? artifact.text.slice(0, -1) : artifact.text;
    return { chars: text.length, ...recordsOf(artifact), read: async (from) => sliceOfLines(text, from) };
  }
  const info = (await source.list()).find((artifact) => artifact.id === id);
  if (info === undefined) return undefined;
  const range = async (start: number, end: number): Promise<Uint8Array> => {
    const bytes = await loadRange.call(source, id, start, end);
    if (bytes === undefined) throw new Error(`artifact ${id} is no longer in the task's store`);
    if (bytes.length === 0 && end > start) throw new Error(`artifact ${id}'s text ended at byte ${start}, short of its ${info.bytes} bytes`);
    return bytes;
  };
  const size = info.bytes > 0 && (await range(info.bytes - 1, info.bytes))[0] === NEWLINE ? info.bytes - 1 : info.bytes;
  return { chars: size, ...recordsOf(info), read: (from) => rangeOfLines(range, size, from) };
}

const NEWLINE = 10;

const recordsOf = (artifact: ArtifactInfo): Pick<QueryText, 'records' | 'json'> => ({
  ...(artifact.records === undefined ? {} : { records: artifact.records }),
  ...(artifact.json === undefined ? {} : { json: artifact.json }),
});

const decode = (parts: readonly Uint8Array[]): string =>
  (parts.length === 1
    ? Buffer.from((parts[0] as Uint8Array).buffer, (parts[0] as Uint8Array).byteOffset, (parts[0] as Uint8Array).byteLength)
    : Buffer.concat(parts)
  ).toString('utf8');

/**
 * The slice of whole lines from byte `from` of a text of `size` bytes read by `range`, as `sliceOfLines` cuts
 * one in memory: about `SLICE_CHARS` bytes, back to its last newline, or one line longer than that whole. A
 * newline is one byte that no character of UTF-8 holds, so a slice never cuts a character.
 */
async function rangeOfLines(range: (start: number, end: number) => Promise<Uint8Array>, size: number, from: number): Promise<LineSlice> {
  const first = await range(from, Math.min(size, from + SLICE_CHARS));
  if (from + first.length >= size) return { text: decode([first]), end: size + 1 };
  const back = first.lastIndexOf(NEWLINE);
  if (back !== -1) return { text: decode([first.subarray(0, back)]), end: from + back + 1 };
  const parts = [first];
  for (let at = from + first.length; ;) {
    const part = await range(at, Math.min(size, at + SLICE_CHARS));
    const newline = part.indexOf(NEWLINE);
    if (newline !== -1) return { text: decode([...parts, part.subarray(0, newline)]), end: at + newline + 1 };
    parts.push(part);
    at += part.length;
    if (at >= size) return { text: decode(parts), end: size + 1 };
  }
}
