import type { LineIndex } from './artifact-text.ts';

/**
 * Consecutive text of an artifact sent in one map call: from character `start` of line `from` to before
 * character `end` of line `to` (0-based lines and characters; the lines between are whole). A chunk holding
 * whole lines has `start` 0 and `end` its last line's length.
 */
export interface Chunk {
  readonly from: number;
  readonly start: number;
  readonly to: number;
  readonly end: number;
}

/** Part of a line held by a chunk: characters `start` (included) to `end` (excluded), 0-based, of its `length`. */
export interface LinePiece {
  readonly line: number;
  readonly start: number;
  readonly end: number;
  readonly length: number;
}

/**
 * Less room than this left in a chunk, a long line starts in the next one: a piece so small would hold a
 * few words of the line, read apart from the rest.
 */
const MIN_PIECE_TOKENS = 64;
/** A piece is first guessed at this share of its room, by the line's characters a token so far: most guesses fit, once counted. */
const PIECE_GUESS = 0.95;
/** Under this share of its room once counted, a piece is guessed once more, larger: the text is sparser there. */
const PIECE_FILL = 0.8;

const isHigh = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/** `end` moved off the middle of a UTF-16 surrogate pair (back, or forward when back would leave nothing after `start`). */
function cutAt(line: string, start: number, end: number): number {
  if (end >= line.length) return line.length;
  const at = Math.max(end, start + 1);
  if (!isHigh(line.charCodeAt(at - 1)) || !isLow(line.charCodeAt(at))) return at;
  return at - 1 > start ? at - 1 : at + 1;
}

/** The prefix of a piece of line `n` in a chunk's text: `N[chars C-D of L]: ` (`D` included). */
const pieceLabel = (n: number, first: number, last: number, length: number): string => `${n}[chars ${first}-${last} of ${length}]: `;

/**
 * The piece of `line` from `start` that fits `budget` tokens, counted piece by piece, never the whole line
 * again: guessed by `ratio` (characters a token), shrunk while it counts too many, grown once when far under.
 */
function cutPiece(
  line: string,
  start: number,
  budget: number,
  ratio: number,
  count: (text: string) => number,
): { readonly end: number; readonly tokens: number } {
  const guess = (chars: number): number => cutAt(line, start, start + Math.max(1, Math.floor(chars)));
  let end = guess(budget * ratio * PIECE_GUESS);
  let tokens = count(line.slice(start, end));
  if (end < line.length && tokens < budget * PIECE_FILL) {
    const grown = guess(((end - start) * budget * PIECE_GUESS) / Math.max(tokens, 1));
    const more = grown > end ? count(line.slice(start, grown)) : Number.POSITIVE_INFINITY;
    if (more <= budget) [end, tokens] = [grown, more];
  }
  while (tokens > budget) {
    const shorter = guess(((end - start) * budget * PIECE_GUESS) / tokens);
    if (shorter >= end) break;
    end = shorter;
    tokens = count(line.slice(start, end));
  }
  return { end, tokens };
}

/**
 * Cuts `index` into consecutive chunks of at most `room` tokens of numbered lines each, every character in
 * exactly one: whole lines while they fit, a line that does not fit what is left starting the next chunk, and
 * a line longer than a whole chunk split over consecutive chunks (its first piece in what is left of the
 * chunk before, its last sharing a chunk with the lines after). Each line is counted once, and a split
 * line's pieces once more: linear in the artifact's size.
 */
export function chunkLines(index: LineIndex, room: number, count: (text: string) => number): Chunk[] {
  const chunks: Chunk[] = [];
  let open: { from: number; start: number; to: number; end: number } | undefined;
  let used = 0;
  const close = (): void => {
    if (open !== undefined) chunks.push(open);
    open = undefined;
    used = 0;
  };
  const add = (n: number, start: number, end: number, tokens: number): void => {
    if (open === undefined) open = { from: n, start, to: n, end };
    else [open.to, open.end] = [n, end];
    used += tokens;
  };
  // A line number's tokens depend on its digits alone (each tokenizer splits digits by position, not value).
  const numbers: number[] = [];
  const numberTokens = (n: number): number => (numbers[String(n).length] ??= count(`${n}: `));
  for (let n = 0; n < index.count; n++) {
    const line = index.line(n);
    // Its number, its text, and the newline before the next.
    const tokens = numberTokens(n) + count(line) + 1;
    if (tokens > room - used && tokens <= room) close();
    if (tokens <= room - used) {
      add(n, 0, line.length, tokens);
      continue;
    }
    let start = 0;
    let ratio = line.length / Math.max(tokens, 1);
    while (start < line.length) {
      const prefix = count(pieceLabel(n, start, line.length - 1, line.length)) + 1;
      if (room - used - prefix < MIN_PIECE_TOKENS) close();
      const piece = cutPiece(line, start, room - used - prefix, ratio, count);
      ratio = (piece.end - start) / Math.max(piece.tokens, 1);
      add(n, start, piece.end, prefix + piece.tokens);
      start = piece.end;
      if (start < line.length) close();
    }
  }
  close();
  return chunks;
}

/** The lines `chunk` holds only part of: its first, its last, or both (one piece when it is inside one line). */
export function chunkPieces(index: LineIndex, chunk: Chunk): LinePiece[] {
  const first = index.line(chunk.from).length;
  if (chunk.from === chunk.to) return chunk.start > 0 || chunk.end < first ? [{ line: chunk.from, start: chunk.start, end: chunk.end, length: first }] : [];
  const last = index.line(chunk.to).length;
  return [
    ...(chunk.start > 0 ? [{ line: chunk.from, start: chunk.start, end: first, length: first }] : []),
    ...(chunk.end < last ? [{ line: chunk.to, start: 0, end: chunk.end, length: last }] : []),
  ];
}

/** A map call's prompt before its lines: the instruction, and which lines follow. */
export function chunkHeader(instruction: string, chunk: Chunk, lines: number): string {
  return `Instruction: ${instruction}\n\nLines ${chunk.from} to ${chunk.to} of ${lines}:\n`;
}

/** A map call's whole prompt: {@link chunkHeader}, then the chunk's lines, `N: text`, a piece of a long line `N[chars C-D of L]: text`. */
export function chunkPrompt(instruction: string, index: LineIndex, chunk: Chunk): string {
  const lines: string[] = [];
  for (let n = chunk.from; n <= chunk.to; n++) {
    const line = index.line(n);
    const start = n === chunk.from ? chunk.start : 0;
    const end = n === chunk.to ? chunk.end : line.length;
    lines.push(start === 0 && end === line.length ? `${n}: ${line}` : `${pieceLabel(n, start, end - 1, line.length)}${line.slice(start, end)}`);
  }
  return chunkHeader(instruction, chunk, index.count) + lines.join('\n');
}

/**
 * `chunk` in two consecutive halves of about as many characters: at a line boundary when one is near the
 * middle (within a quarter of the chunk), else inside the middle line; `undefined` when it cannot be split
 * (a single character).
 */
export function halveChunk(index: LineIndex, chunk: Chunk): readonly [Chunk, Chunk] | undefined {
  const segments: Segment[] = [];
  for (let n = chunk.from; n <= chunk.to; n++) {
    segments.push({ line: n, start: n === chunk.from ? chunk.start : 0, end: n === chunk.to ? chunk.end : index.line(n).length });
  }
  const size = (at: number): number => (segments[at] as Segment).end - (segments[at] as Segment).start;
  const total = segments.reduce((sum, segment) => sum + segment.end - segment.start, 0);
  const half = total / 2;
  // The segment the middle falls in, and the characters before it.
  let at = 0;
  let before = 0;
  while (before + size(at) < half) before += size(at++);
  const middle = segments[at] as Segment;
  const boundaries = [
    ...(at > 0 ? [{ position: before, last: at - 1 }] : []),
    ...(at < segments.length - 1 ? [{ position: before + size(at), last: at }] : []),
  ];
  const nearest = boundaries.toSorted((a, b) => Math.abs(a.position - half) - Math.abs(b.position - half))[0];
  const atBoundary = (last: number): readonly [Chunk, Chunk] => {
    const end = segments[last] as Segment;
    const next = segments[last + 1] as Segment;
    return [
      { from: chunk.from, start: chunk.start, to: end.line, end: end.end },
      { from: next.line, start: next.start, to: chunk.to, end: chunk.end },
    ];
  };
  if (nearest !== undefined && Math.abs(nearest.position - half) <= total / 4) return atBoundary(nearest.last);
  const cut = cutAt(index.line(middle.line), middle.start, middle.start + Math.round(half - before));
  if (cut > middle.start && cut < middle.end) {
    return [
      { from: chunk.from, start: chunk.start, to: middle.line, end: cut },
      { from: middle.line, start: cut, to: chunk.to, end: chunk.end },
    ];
  }
  return nearest === undefined ? undefined : atBoundary(nearest.last);
}

/** What a chunk holds of one of its lines. */
interface Segment {
  readonly line: number;
  readonly start: number;
  readonly end: number;
}
