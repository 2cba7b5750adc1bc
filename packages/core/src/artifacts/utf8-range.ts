/** Characters between two marks: a byte is found by walking at most this many characters from one. */
const MARK_CHARS = 65_536;

/**
 * Where a JS string's UTF-8 bytes fall in its characters: a mark every {@link MARK_CHARS} characters (a
 * 1 GiB text has 16,384), or none for a text of ASCII only, where they are the same.
 */
export interface Utf8Marks {
  /** UTF-8 bytes of the whole text. */
  readonly bytes: number;
  /** The character (UTF-16 unit) and byte of each mark; absent for ASCII. */
  readonly marks?: { readonly chars: Float64Array; readonly bytes: Float64Array };
}

/** Marks `text`'s bytes in one pass. */
export function utf8Marks(text: string): Utf8Marks {
  const count = Math.floor(text.length / MARK_CHARS) + 1;
  const chars = new Float64Array(count);
  const bytes = new Float64Array(count);
  let char = 0;
  let byte = 0;
  for (let mark = 1; mark < count; mark++) {
    let next = mark * MARK_CHARS;
    // Never between the halves of a surrogate pair: each half alone would count as a character of three bytes.
    if (isHighSurrogate(text.charCodeAt(next - 1))) next++;
    byte += Buffer.byteLength(text.slice(char, next));
    char = next;
    chars[mark] = char;
    bytes[mark] = byte;
  }
  const total = byte + Buffer.byteLength(text.slice(char));
  return total === text.length ? { bytes: total } : { bytes: total, marks: { chars, bytes } };
}

/** Bytes `start` to `end` (`end` excluded, clamped) of `text`'s UTF-8, encoding only the characters they fall in. */
export function utf8Range(text: string, marked: Utf8Marks, start: number, end: number): Uint8Array {
  const from = Math.min(Math.max(0, Math.floor(start)), marked.bytes);
  const to = Math.min(Math.max(from, Math.floor(end)), marked.bytes);
  if (marked.marks === undefined) return Buffer.from(text.slice(from, to), 'latin1');
  const first = charAt(text, marked.marks, from);
  const last = charAt(text, marked.marks, to);
  // `last` starts at or before `to`: one character more covers a range that ends inside it.
  const lastEnd = last.byte < to ? last.char + charUnits(text, last.char) : last.char;
  return Buffer.from(text.slice(first.char, lastEnd)).subarray(from - first.byte, to - first.byte);
}

/** The character that byte `byte` falls in (or starts), and the byte it starts at. */
function charAt(text: string, marks: NonNullable<Utf8Marks['marks']>, byte: number): { char: number; byte: number } {
  let low = 0;
  let high = marks.bytes.length - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if ((marks.bytes[middle] as number) <= byte) low = middle;
    else high = middle - 1;
  }
  let char = marks.chars[low] as number;
  let at = marks.bytes[low] as number;
  while (char < text.length) {
    const size = charBytes(text, char);
    if (at + size > byte) break;
    at += size;
    char += charUnits(text, char);
  }
  return { char, byte: at };
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/** UTF-16 units of the character at `char`: 2 for a surrogate pair, else 1. */
function charUnits(text: string, char: number): number {
  return isHighSurrogate(text.charCodeAt(char)) && isLowSurrogate(text.charCodeAt(char + 1)) ? 2 : 1;
}

/** UTF-8 bytes of the character at `char` (a lone surrogate is written as U+FFFD: 3). */
function charBytes(text: string, char: number): number {
  const code = text.charCodeAt(char);
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  return charUnits(text, char) === 2 ? 4 : 3;
}
