import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import type { LineIndex } from './artifact-text.ts';
import type { ArtifactSlice, ReadRequest, SliceLine } from './artifact-store.ts';
import type { ArtifactInfo } from './artifact-types.ts';

/** A line's number and separator as a page shows them (`12: `), counted against the page. */
const PREFIX_TOKENS = 3;

/**
 * Characters a token holds at most, as a page reckons: more than any tokenizer puts in one on average (as
 * `hasMoreTokens` reckons), so a rest of more characters than 16 a token of the page is given in part, never
 * counted whole. A rest that would have fitted anyway comes in parts of a page each: smaller pages, never bigger.
 */
const PAGE_CHARS_PER_TOKEN = 16;

/** A line as a page takes it: some of its characters, and how many it has. */
export interface PagePart {
  /** The line's characters from where the page asked, at most as many as it asked. */
  readonly text: string;
  /** The whole line's length, in characters. */
  readonly length: number;
}

/**
 * The lines a page is read from: an artifact's {@link LineIndex} (`pageSource`), or a reader's lines loaded
 * by ranges, a page's worth at a time.
 */
export interface PageSource {
  /** How many lines the artifact has. */
  readonly count: number;
  /**
   * Line `n` from character `from`, at most `max` characters of it; `undefined` for a line the source does
   * not hold at hand (one past what it loaded for this page): the page stops before it.
   */
  line(n: number, from: number, max: number): PagePart | undefined;
}

/** A {@link PageSource} over a whole text's lines. */
export function pageSource(index: LineIndex): PageSource {
  return {
    count: index.count,
    line(n, from, max) {
      const line = index.line(n);
      return { text: from === 0 && line.length <= max ? line : line.slice(from, from + max), length: line.length };
    },
  };
}

/** Characters of a line a page of `pageTokens` reads at most: a longer rest is given in part. */
export const pageWindow = (pageTokens: number): number => pageTokens * PAGE_CHARS_PER_TOKEN;

/**
 * `request`'s line and limit, checked against artifact `id` of `count` lines; its `charOffset` as given, for
 * {@link checkCharOffset} once the line's length is known. The limit is capped at ARTIFACT_DEFAULTS.maxReadLines.
 * @throws {KlymError} `INVALID_ARGUMENT` for an offset past the end or a bad limit
 */
export function checkRead(id: string, count: number, request: ReadRequest): { offset: number; charOffset: number; limit: number } {
  const { offset = 0, charOffset = 0, limit = ARTIFACT_DEFAULTS.readLines } = request;
  if (!Number.isInteger(offset) || offset < 0) throw new KlymError('INVALID_ARGUMENT', `\`offset\`: expected a line number of 0 or more, got ${offset}`);
  if (offset >= count && !(offset === 0 && count === 0)) {
    throw new KlymError('INVALID_ARGUMENT', `\`offset\`: ${offset} is past the end of ${id}, which has ${count} lines (0 to ${count - 1})`);
  }
  if (!Number.isInteger(limit) || limit < 1) throw new KlymError('INVALID_ARGUMENT', `\`limit\`: expected a positive number of lines, got ${limit}`);
  return { offset, charOffset, limit: Math.min(limit, ARTIFACT_DEFAULTS.maxReadLines) };
}

/** @throws {KlymError} `INVALID_ARGUMENT` unless `charOffset` is a character of line `offset`, of `length` (or 0). */
export function checkCharOffset(offset: number, charOffset: number, length: number): void {
  if (!Number.isInteger(charOffset) || charOffset < 0 || (charOffset > 0 && charOffset >= length)) {
    throw new KlymError('INVALID_ARGUMENT', `\`char_offset\`: expected a character of line ${offset} (0 to ${Math.max(0, length - 1)}), got ${charOffset}`);
  }
}

/**
 * Lines from `offset` (from `charOffset` in it) while they fit in `pageTokens` and `limit`: a page stops
 * before a whole line that would not fit, and only a line that does not fit an empty page is given in
 * part, as many characters as fit. So a page is never bigger than `pageTokens`, and `next` says exactly
 * where the rest starts. No more than {@link pageWindow} characters of a line are ever counted, so reading
 * a line of any length through costs time linear in its length.
 */
export function readPage(
  artifact: ArtifactInfo,
  source: PageSource,
  offset: number,
  charOffset: number,
  limit: number,
  pageTokens: number,
  countTokens: (text: string) => number,
): ArtifactSlice {
  const lines: SliceLine[] = [];
  const window = pageWindow(pageTokens);
  let room = pageTokens;
  for (let n = offset; n < source.count && lines.length < limit; n++) {
    const from = n === offset ? charOffset : 0;
    // One character past the window says whether the rest is longer than it.
    const part = source.line(n, from, window + 1);
    if (part === undefined) break;
    const { text: rest, length } = part;
    const whole = from + rest.length >= length;
    // Cheap before exact: a text of no more characters than the room has no more tokens than it. A rest
    // longer than the window is not counted: it is given in part.
    const tokens = !whole ? Infinity : rest.length + PREFIX_TOKENS <= room ? rest.length : countTokens(rest);
    if (tokens + PREFIX_TOKENS <= room) {
      lines.push(from === 0 ? { n, text: rest } : { n, text: rest, fromChar: from, length });
      room -= tokens + PREFIX_TOKENS;
      continue;
    }
    if (lines.length > 0) return { artifact, offset, lines, next: { offset: n } };
    // One line bigger than a page: as much of it as fits, and where it goes on.
    const take = fittingChars(rest, room - PREFIX_TOKENS, countTokens);
    lines.push({ n, text: rest.slice(0, take), fromChar: from, length });
    return { artifact, offset, lines, next: { offset: n, charOffset: from + take } };
  }
  const end = offset + lines.length;
  return end < source.count ? { artifact, offset, lines, next: { offset: end } } : { artifact, offset, lines };
}

/**
 * How many of `text`'s first characters fit in `tokens` (at least one, never half a surrogate pair): a
 * guess from the text's own characters per token, narrowed by counting, a few counts of at most a page each.
 */
export function fittingChars(text: string, tokens: number, countTokens: (text: string) => number): number {
  const budget = Math.max(1, tokens);
  let low = 0;
  let high = Math.min(text.length, budget * 8);
  // The text's density near its start sets the first guess; each count then guesses again from the density
  // it found (a page of prose closes in two or three counts), halving the gap when that guess would not narrow it.
  let guess = Math.min(high, budget * 3);
  for (let round = 0; round < 24 && high - low > Math.max(16, Math.floor(high / 200)); round++) {
    const counted = countTokens(text.slice(0, guess));
    if (counted <= budget) low = guess;
    else high = guess;
    const dense = counted === 0 ? high : Math.floor((guess * budget) / counted);
    // Aim a little inside the side the density points to, so that the next count closes the gap from there.
    const aimed = counted <= budget ? dense - Math.max(8, Math.floor(dense / 400)) : dense + Math.max(8, Math.floor(dense / 400));
    guess = aimed > low && aimed < high ? aimed : Math.floor((low + high) / 2);
  }
  if (low === 0 && countTokens(text.slice(0, high)) <= budget) low = high;
  let take = Math.max(1, low);
  // Never split a surrogate pair: the half would not be a character.
  const code = text.charCodeAt(take - 1);
  if (code >= 0xd800 && code <= 0xdbff && take < text.length) take = take > 1 ? take - 1 : take + 1;
  return take;
}
