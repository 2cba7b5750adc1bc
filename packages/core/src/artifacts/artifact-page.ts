import type { LineIndex } from './artifact-text.ts';
import type { ArtifactSlice, SliceLine } from './artifact-store.ts';
import type { ArtifactInfo } from './artifact-types.ts';

/** A line's number and separator as a page shows them (`12: `), counted against the page. */
const PREFIX_TOKENS = 3;

/**
 * Lines from `offset` (from `charOffset` in it) while they fit in `pageTokens` and `limit`: a page stops
 * before a whole line that would not fit, and only a line that does not fit an empty page is given in
 * part, as many characters as fit. So a page is never bigger than `pageTokens`, and `next` says exactly
 * where the rest starts.
 */
export function readPage(
  artifact: ArtifactInfo,
  index: LineIndex,
  offset: number,
  charOffset: number,
  limit: number,
  pageTokens: number,
  countTokens: (text: string) => number,
): ArtifactSlice {
  const lines: SliceLine[] = [];
  let room = pageTokens;
  for (let n = offset; n < index.count && lines.length < limit; n++) {
    const line = index.line(n);
    const from = n === offset ? charOffset : 0;
    const rest = from === 0 ? line : line.slice(from);
    // Cheap before exact: a text of no more characters than the room has no more tokens than it.
    const tokens = rest.length + PREFIX_TOKENS <= room ? rest.length : countTokens(rest);
    if (tokens + PREFIX_TOKENS <= room) {
      lines.push(from === 0 ? { n, text: rest } : { n, text: rest, fromChar: from, length: line.length });
      room -= tokens + PREFIX_TOKENS;
      continue;
    }
    if (lines.length > 0) return { artifact, offset, lines, next: { offset: n } };
    // One line bigger than a page: as much of it as fits, and where it goes on.
    const take = fittingChars(rest, room - PREFIX_TOKENS, countTokens);
    lines.push({ n, text: rest.slice(0, take), fromChar: from, length: line.length });
    return { artifact, offset, lines, next: { offset: n, charOffset: from + take } };
  }
  const end = offset + lines.length;
  return end < index.count ? { artifact, offset, lines, next: { offset: end } } : { artifact, offset, lines };
}

/**
 * How many of `text`'s first characters fit in `tokens` (at least one, never half a surrogate pair): a
 * guess from the text's own characters per token, narrowed by counting, a few counts of at most a page each.
 */
export function fittingChars(text: string, tokens: number, countTokens: (text: string) => number): number {
  let low = 0;
  let high = Math.min(text.length, Math.max(1, tokens) * 8);
  // The text's density near its start sets the first guess; then halve the gap until it closes.
  let guess = Math.min(high, Math.max(1, tokens) * 3);
  for (let round = 0; round < 24 && high - low > Math.max(16, Math.floor(high / 200)); round++) {
    if (countTokens(text.slice(0, guess)) <= tokens) low = guess;
    else high = guess;
    guess = Math.floor((low + high) / 2);
  }
  if (low === 0 && countTokens(text.slice(0, high)) <= tokens) low = high;
  let take = Math.max(1, low);
  // Never split a surrogate pair: the half would not be a character.
  const code = text.charCodeAt(take - 1);
  if (code >= 0xd800 && code <= 0xdbff && take < text.length) take = take > 1 ? take - 1 : take + 1;
  return take;
}
