/** Where each line of a text starts: line `n` is `text.slice(starts[n], starts[n + 1] - 1)` (its newline left out). */
export interface LineIndex {
  readonly text: string;
  /** How many lines: a last line without a newline counts, an empty text has none. */
  readonly count: number;
  /** Line `n`, without its newline (nor a `\r` before it). */
  line(n: number): string;
}

/** Indexes `text`'s lines in one pass: an offset per line, 4 bytes each, never a copy of the text. */
export function indexLines(text: string): LineIndex {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) count++;
  const endsOpen = text.length > 0 && !text.endsWith('\n');
  const total = count + (endsOpen ? 1 : 0);
  const starts = new Uint32Array(total + 1);
  let line = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) starts[++line] = at + 1;
  starts[total] = endsOpen ? text.length + 1 : text.length;
  return {
    text,
    count: total,
    line(n) {
      const raw = text.slice(starts[n] as number, (starts[n + 1] as number) - 1);
      return raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    },
  };
}

/** How many lines `text` has, as {@link indexLines} counts them, without indexing it. */
export function countLines(text: string): number {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) count++;
  return count + (text.length > 0 && !text.endsWith('\n') ? 1 : 0);
}

/** `line` cut to `max` characters, saying how much was left out. */
export function clipLine(line: string, max: number): string {
  return line.length <= max ? line : `${line.slice(0, max)}… [${line.length - max} more characters]`;
}
