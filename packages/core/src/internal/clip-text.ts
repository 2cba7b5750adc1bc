const isHigh = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/** How many characters the code unit at `at` takes inside a JSON string. */
function jsonCost(text: string, at: number): number {
  const code = text.charCodeAt(at);
  if (code === 0x22 || code === 0x5c) return 2; // \" and \\
  if (code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d) return 2; // \b \t \n \f \r
  if (code < 0x20) return 6; // \u00XX
  // JSON.stringify escapes a lone surrogate as \uXXXX; a pair stays as it is.
  if (isHigh(code)) return at + 1 < text.length && isLow(text.charCodeAt(at + 1)) ? 1 : 6;
  if (isLow(code)) return at > 0 && isHigh(text.charCodeAt(at - 1)) ? 1 : 6;
  return 1;
}

/** The length of the longest prefix of `text` that takes at most `budget` characters as JSON. */
function fittingPrefix(text: string, budget: number): number {
  let cost = 0;
  let at = 0;
  for (; at < text.length; at++) {
    cost += jsonCost(text, at);
    if (cost > budget) break;
  }
  return at;
}

/**
 * `text` cut so that it takes at most `max` characters as a JSON string, and so holds at most `max`
 * characters (escapes count: 400 quotes are 800 characters of JSON). A cut text ends with `…`, which
 * counts in `max`; a surrogate pair is never split.
 */
export function clipText(text: string, max: number): string {
  if (fittingPrefix(text, max) === text.length) return text;
  let end = fittingPrefix(text, Math.max(0, max - 1));
  if (end > 0 && isHigh(text.charCodeAt(end - 1))) end--;
  return `${text.slice(0, end)}…`;
}
