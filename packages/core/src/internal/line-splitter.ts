/** What a {@link createLineSplitter} has read; several splitters may add to one. */
export interface LineCounts {
  /** Bytes written. */
  bytes: number;
  /** Lines handed on. */
  lines: number;
  /** Bytes dropped: the rest of each line longer than the bound. */
  droppedBytes: number;
}

/** Options of {@link createLineSplitter}. */
export interface LineSplitterOptions {
  /** Bytes of one line handed on; a longer line is cut there. @default 8_192 */
  readonly maxLineBytes?: number;
  /** Where to count what is read and dropped. @default counts of its own */
  readonly counts?: LineCounts;
  /** Decides, before it becomes a string, whether a line of this many bytes is handed on; one refused is dropped and counted. @default every line */
  readonly admit?: (bytes: number) => boolean;
}

/**
 * Splits a byte stream into lines for `onLine` without building strings of what it drops: chunks are
 * scanned as bytes, a partial line is copied into one buffer of `maxLineBytes`, and only a line handed on
 * becomes a string (a copy of its own bytes, never a slice that keeps a larger string alive). A longer
 * line is cut at the bound, on a character boundary, and marked `…`; the rest of it is dropped and
 * counted, as is a line `admit` refuses. So a child that floods its stderr costs a fixed buffer, however
 * much it writes.
 */
export function createLineSplitter(onLine: (line: string) => void, options: LineSplitterOptions = {}): { write(chunk: Buffer): void; end(): void } {
  const maxLineBytes = options.maxLineBytes ?? 8192;
  const counts = options.counts ?? { bytes: 0, lines: 0, droppedBytes: 0 };
  const admit = options.admit ?? (() => true);
  const pending = Buffer.allocUnsafe(maxLineBytes);
  let length = 0;
  let overflowing = false;

  const emit = (bytes: Buffer, start: number, end: number, suffix = ''): void => {
    const last = bytes[end - 1] === 0x0d ? end - 1 : end;
    if (last <= start) return;
    if (!admit(last - start)) {
      counts.droppedBytes += last - start;
      return;
    }
    counts.lines++;
    onLine(bytes.toString('utf8', start, last) + suffix);
  };
  /** Adds `chunk[start, end)` to the pending line; past the bound, hands on the cut line and drops the rest. */
  const take = (chunk: Buffer, start: number, end: number): void => {
    if (overflowing) {
      counts.droppedBytes += end - start;
      return;
    }
    const room = maxLineBytes - length;
    const taken = Math.min(room, end - start);
    chunk.copy(pending, length, start, start + taken);
    length += taken;
    if (taken === end - start) return;
    const cut = characterBoundary(pending, length);
    counts.droppedBytes += end - start - taken + (length - cut);
    emit(pending, 0, cut, '…');
    overflowing = true;
  };

  return {
    write(chunk) {
      counts.bytes += chunk.length;
      let start = 0;
      for (let newline = chunk.indexOf(0x0a); newline !== -1; newline = chunk.indexOf(0x0a, start)) {
        if (length === 0 && !overflowing && newline - start <= maxLineBytes) {
          // The common case, a whole line inside one chunk: no copy.
          emit(chunk, start, newline);
        } else {
          take(chunk, start, newline);
          if (!overflowing) emit(pending, 0, length);
        }
        length = 0;
        overflowing = false;
        start = newline + 1;
      }
      if (start < chunk.length) take(chunk, start, chunk.length);
    },
    end() {
      if (!overflowing) emit(pending, 0, length);
      length = 0;
      overflowing = false;
    },
  };
}

/** The longest prefix of `bytes[0, end)` that ends on a whole UTF-8 character. */
function characterBoundary(bytes: Buffer, end: number): number {
  let lead = end - 1;
  while (lead > 0 && lead > end - 4 && ((bytes[lead] as number) & 0xc0) === 0x80) lead--;
  const first = bytes[lead] as number;
  const size = first >= 0xf0 ? 4 : first >= 0xe0 ? 3 : first >= 0xc0 ? 2 : 1;
  return lead + size <= end ? end : lead;
}
