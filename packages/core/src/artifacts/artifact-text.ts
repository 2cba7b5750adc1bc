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

/** Texts up to this many characters are counted whole; a bigger one from samples (a 21 MB answer takes o200k seconds). */
const EXACT_COUNT_CHARS = 2_000_000;
const SAMPLES = 32;
const SAMPLE_CHARS = 32_768;

/**
 * `text`'s tokens: counted whole up to two million characters; past that, from 32 evenly spaced samples
 * of 32 KiB, scaled to its length — within a few percent on logs and JSON, at a twentieth of the cost. The
 * count is what an artifact's size says; no request is ever sized by it.
 */
export function artifactTokens(text: string, countTokens: (text: string) => number): number {
  if (text.length <= EXACT_COUNT_CHARS) return countTokens(text);
  const step = Math.floor((text.length - SAMPLE_CHARS) / (SAMPLES - 1));
  let tokens = 0;
  for (let sample = 0; sample < SAMPLES; sample++) tokens += countTokens(text.slice(sample * step, sample * step + SAMPLE_CHARS));
  return Math.round((tokens / (SAMPLES * SAMPLE_CHARS)) * text.length);
}

/**
 * Whether an artifact of `bytes` had its tokens counted on samples ({@link artifactTokens}): past two million
 * characters, which a text of fewer bytes cannot have.
 */
export const sampledTokens = (bytes: number): boolean => bytes > EXACT_COUNT_CHARS;

/**
 * Whether `text` has more than `limit` tokens, counting no more of it than needed: a prefix of 16
 * characters a token (more than any tokenizer puts in one on average) already over the limit decides it.
 */
export function hasMoreTokens(text: string, limit: number, countTokens: (text: string) => number): boolean {
  // Cheap before exact: a text of no more characters than the limit has no more tokens than it.
  if (text.length <= limit) return false;
  const prefix = limit * 16;
  if (text.length > prefix && countTokens(text.slice(0, prefix)) > limit) return true;
  return countTokens(text) > limit;
}
