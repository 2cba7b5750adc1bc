/**
 * Splits a byte stream into lines for `onLine`, holding at most `maxLineBytes` of a line in memory: a
 * longer line is cut there and marked with `…`, and the rest of it is dropped. So a child that floods
 * its stderr costs a bounded amount of memory, however much it writes.
 */
export function createLineSplitter(
  onLine: (line: string) => void,
  maxLineBytes = 8192,
): { write(chunk: Buffer | string): void; end(): void } {
  let pending = '';
  let overflowing = false;
  const emit = (line: string): void => {
    const trimmed = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (trimmed.length > 0) onLine(trimmed);
  };
  return {
    write(chunk) {
      const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      let start = 0;
      for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', start)) {
        if (!overflowing) emit(pending + text.slice(start, newline));
        pending = '';
        overflowing = false;
        start = newline + 1;
      }
      if (overflowing) return;
      pending += text.slice(start);
      if (pending.length > maxLineBytes) {
        emit(`${pending.slice(0, maxLineBytes)}…`);
        pending = '';
        overflowing = true;
      }
    },
    end() {
      if (!overflowing) emit(pending);
      pending = '';
    },
  };
}
