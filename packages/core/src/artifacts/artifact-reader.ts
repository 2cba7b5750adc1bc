import { estimateTokens } from '../agent/token-count.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { checkCharOffset, checkRead, pageWindow, readPage, type PagePart, type PageSource } from './artifact-page.ts';
import type { ArtifactSlice, ReadRequest } from './artifact-store.ts';
import type { ArtifactInfo } from './artifact-types.ts';

/** Where a reader finds a task's artifacts: their infos, and bytes of a text by range (a task store's `loadArtifactRange`). */
export interface ArtifactRanges {
  list(): Promise<readonly ArtifactInfo[]>;
  /** Bytes `start` to `end` of artifact `id`'s UTF-8 text; `undefined` when there is no such artifact. */
  loadRange(id: string, start: number, end: number): Promise<Uint8Array | undefined>;
}

/** Options of {@link createArtifactReader}. */
export interface ArtifactReaderOptions {
  /** @default `estimateTokens` */
  readonly countTokens?: (text: string) => number;
  /** @default ARTIFACT_DEFAULTS.pageTokens */
  readonly pageTokens?: number;
}

/** Reads a task's artifacts by pages for callers outside its run (`read_task_artifact`), holding no text. */
export interface ArtifactReader {
  /** As `ArtifactStore.read`. @throws {KlymError} `ARTIFACT_NOT_FOUND`; `INVALID_ARGUMENT` */
  read(id: string, request?: ReadRequest): Promise<ArtifactSlice>;
  /** What is known of artifact `id`. @throws {KlymError} `ARTIFACT_NOT_FOUND`, naming the task's artifacts */
  info(id: string): Promise<ArtifactInfo>;
}

/** Lines longer than this many bytes are never loaded whole: their length and marks are indexed instead. */
const LONG_LINE_BYTES = 65_536;
/** Characters between two marks of a long line: a part of it is loaded from the mark before it. */
const MARK_CHARS = 8_192;
/** UTF-8 bytes a UTF-16 unit takes at most (a surrogate pair's two take four). */
const BYTES_PER_UNIT = 3;

/** A line too long to load whole: its length, and where its characters fall in its bytes every {@link MARK_CHARS}. */
interface LongLine {
  readonly length: number;
  /** The character in the line, and the byte in the text, of each mark; the first is the line's start. */
  readonly chars: Float64Array;
  readonly bytes: Float64Array;
}

/** An artifact's lines as a reader keeps them: where each starts, in bytes, and its long lines' marks. Never its text. */
interface LineOffsets {
  readonly artifact: ArtifactInfo;
  readonly count: number;
  /** Line `n` is bytes `starts[n]` to `starts[n + 1] - 1` (its newline left out), a `\r` before the newline too. */
  readonly starts: Uint32Array | Float64Array;
  readonly long: ReadonlyMap<number, LongLine>;
}

const decoder = new TextDecoder();

/**
 * A reader of a task's artifacts by ranges: it keeps the lines of the artifact read last indexed, as offsets
 * (4 bytes a line, and a mark every 8,192 characters of a line longer than 64 KiB), built from one pass over
 * its bytes, which are then let go. A page then loads only its own lines, and a part of a long line from the
 * mark before it: no text is held between reads, and paging through a text costs time linear in it.
 *
 * @throws {KlymError} `CONFIG_INVALID` for a `pageTokens` that is not an integer of 100 or more
 * @example
 * ```ts
 * const reader = createArtifactReader({
 *   list: () => store.listArtifacts(taskId),
 *   loadRange: (id, start, end) => store.loadArtifactRange(taskId, id, start, end),
 * })
 * const page = await reader.read('art_0123456789ab', { offset: 0, charOffset: 32_000 })
 * ```
 */
export function createArtifactReader(source: ArtifactRanges, options: ArtifactReaderOptions = {}): ArtifactReader {
  const countTokens = options.countTokens ?? estimateTokens;
  const pageTokens = options.pageTokens ?? ARTIFACT_DEFAULTS.pageTokens;
  if (!Number.isInteger(pageTokens) || pageTokens < 100)
    throw new KlymError('CONFIG_INVALID', `Expected the artifact reader's \`pageTokens\` to be an integer of 100 or more, got ${pageTokens}`);
  let last: LineOffsets | undefined;

  const notFound = async (id: string): Promise<never> => {
    if (last?.artifact.id === id) last = undefined;
    const known = (await source.list()).map((artifact) => artifact.id);
    const hint = known.length === 0 ? 'this task has none' : `this task has ${known.join(', ')}`;
    throw new KlymError('ARTIFACT_NOT_FOUND', `No artifact "${String(id).slice(0, 80)}" in this task: ${hint}`);
  };
  const info = async (id: string): Promise<ArtifactInfo> => {
    if (last?.artifact.id === id) return last.artifact;
    return (await source.list()).find((artifact) => artifact.id === id) ?? notFound(id);
  };
  const load = async (id: string, start: number, end: number): Promise<Uint8Array> => (await source.loadRange(id, start, end)) ?? notFound(id);
  const offsetsOf = async (id: string): Promise<LineOffsets> => {
    if (last?.artifact.id === id) return last;
    const artifact = await info(id);
    last = indexBytes(artifact, await load(id, 0, artifact.bytes));
    return last;
  };

  /** Characters `from` to `to` of long line `line`, from the mark before `from`. */
  const longPart = async (offsets: LineOffsets, n: number, line: LongLine, from: number, to: number): Promise<string> => {
    // The last mark at or before `from`.
    let mark = 0;
    for (let high = line.chars.length - 1; mark < high;) {
      const middle = Math.ceil((mark + high) / 2);
      if ((line.chars[middle] as number) <= from) mark = middle;
      else high = middle - 1;
    }
    const char = line.chars[mark] as number;
    const byte = line.bytes[mark] as number;
    // The line's last byte bounds the range: its newline (and a `\r` before it) are never asked for.
    const lineEnd = (offsets.starts[n + 1] as number) - 1;
    const units = to - char;
    // As many bytes as the line has a unit on average, a little more; a range that falls short is read again
    // with enough for any text (three a unit), and a whole character past them: a cut one decodes after them.
    const density = (lineEnd - (line.bytes[0] as number)) / Math.max(1, line.length);
    const guess = Math.min(lineEnd, byte + Math.ceil(units * density * 1.05) + 16);
    let text = decoder.decode(await load(offsets.artifact.id, byte, guess));
    if (text.length < units + 2 && guess < lineEnd) {
      text = decoder.decode(await load(offsets.artifact.id, byte, Math.min(lineEnd, byte + units * BYTES_PER_UNIT + 4)));
    }
    return text.slice(from - char, to - char);
  };

  return {
    info,
    async read(id, request = {}) {
      const offsets = await offsetsOf(id);
      const { offset, charOffset, limit } = checkRead(id, offsets.count, request);
      const tokens = request.pageTokens ?? pageTokens;
      const window = pageWindow(tokens) + 1;
      // The lines this page could hold, loaded before it is cut: short ones in one range, while their bytes
      // could fit (and each costs a page three tokens at least), then a long one in part, from its mark.
      const parts = new Map<number, PagePart & { readonly from: number }>();
      const end = offset + Math.min(limit, Math.ceil(tokens / 3), offsets.count - offset);
      const shortLines = async (first: number, after: number): Promise<void> => {
        if (after <= first) return;
        const text = decoder.decode(await load(id, offsets.starts[first] as number, (offsets.starts[after] as number) - 1));
        let at = 0;
        for (let n = first; n < after; n++) {
          const next = n + 1 < after ? text.indexOf('\n', at) : text.length;
          const raw = text.slice(at, next);
          const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
          parts.set(n, { text: line, length: line.length, from: 0 });
          at = next + 1;
        }
      };
      let bytes = 0;
      let first = offset;
      let n = offset;
      for (; n < end && (n === offset || bytes <= window * BYTES_PER_UNIT); n++) {
        const long = offsets.long.get(n);
        if (long === undefined) {
          bytes += (offsets.starts[n + 1] as number) - (offsets.starts[n] as number);
          continue;
        }
        await shortLines(first, n);
        first = n + 1;
        const from = n === offset ? charOffset : 0;
        const valid = Number.isInteger(from) && from >= 0 && from < long.length;
        const text = valid ? await longPart(offsets, n, long, from, Math.min(long.length, from + window)) : '';
        parts.set(n, { text, length: long.length, from });
        // A part that is not the rest of its line ends the page in it.
        if (from + text.length < long.length) break;
        bytes += text.length * BYTES_PER_UNIT;
      }
      await shortLines(first, Math.min(n, end));
      checkCharOffset(offset, charOffset, parts.get(offset)?.length ?? 0);
      const lines: PageSource = {
        count: offsets.count,
        line(line, from, max) {
          const part = parts.get(line);
          if (part === undefined) return undefined;
          const start = from - part.from;
          return { text: start === 0 && part.text.length <= max ? part.text : part.text.slice(start, start + max), length: part.length };
        },
      };
      return readPage(offsets.artifact, lines, offset, charOffset, limit, tokens, countTokens);
    },
  };
}

/** Indexes an artifact's lines from its bytes in one pass: where each starts, and its long lines' length and marks. */
function indexBytes(artifact: ArtifactInfo, bytes: Uint8Array): LineOffsets {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let newlines = 0;
  for (let at = buffer.indexOf(10); at !== -1; at = buffer.indexOf(10, at + 1)) newlines++;
  const endsOpen = buffer.length > 0 && buffer[buffer.length - 1] !== 10;
  const count = newlines + (endsOpen ? 1 : 0);
  const starts = buffer.length < 2 ** 32 - 1 ? new Uint32Array(count + 1) : new Float64Array(count + 1);
  const long = new Map<number, LongLine>();
  let line = 0;
  let start = 0;
  const end = (next: number): void => {
    starts[line] = start;
    if (next - 1 - start > LONG_LINE_BYTES) long.set(line, markLine(buffer, start, next - 1));
    line++;
    start = next;
  };
  for (let at = buffer.indexOf(10); at !== -1; at = buffer.indexOf(10, at + 1)) end(at + 1);
  if (endsOpen) end(buffer.length + 1);
  starts[count] = start;
  return { artifact, count, starts, long };
}

/** A long line's length in UTF-16 units (a `\r` before its newline left out) and a mark every {@link MARK_CHARS} of them. */
function markLine(buffer: Buffer, start: number, end: number): LongLine {
  const stop = buffer[end - 1] === 13 ? end - 1 : end;
  const chars = [0];
  const bytes = [start];
  let units = 0;
  for (let at = start; at < stop; at++) {
    const byte = buffer[at] as number;
    // Continuation bytes (10xxxxxx) start no character.
    if ((byte & 0xc0) === 0x80) continue;
    if (units - (chars.at(-1) as number) >= MARK_CHARS) {
      chars.push(units);
      bytes.push(at);
    }
    units += byte >= 0xf0 ? 2 : 1;
  }
  return { length: units, chars: Float64Array.from(chars), bytes: Float64Array.from(bytes) };
}
