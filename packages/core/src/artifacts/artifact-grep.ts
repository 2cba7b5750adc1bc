import type { RE2JS } from 're2js';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { clipLine, type LineIndex } from './artifact-text.ts';
import type { ArtifactGrep, ArtifactMatch } from './artifact-store.ts';
import type { ArtifactInfo } from './artifact-types.ts';

/**
 * Every match of `pattern` in `index`'s lines, counted; the first `maxMatches` shown. A line up to
 * `ARTIFACT_DEFAULTS.maxLineChars` is shown whole, once, with how many matches it holds; in a longer line
 * (a JSON answer on one line, a minified file) each match is shown as a window of
 * `ARTIFACT_DEFAULTS.grepWindowChars` on each side, with where it is, so no match hides behind a cut.
 */
export function grepLines(artifact: ArtifactInfo, index: LineIndex, pattern: RE2JS, context: number, maxMatches: number): ArtifactGrep {
  const shown = (n: number): string => clipLine(index.line(n), ARTIFACT_DEFAULTS.maxLineChars);
  const around = (n: number): { before: string[]; after: string[] } => {
    const before: string[] = [];
    for (let k = Math.max(0, n - context); k < n; k++) before.push(shown(k));
    const after: string[] = [];
    for (let k = n + 1; k <= Math.min(index.count - 1, n + context); k++) after.push(shown(k));
    return { before, after };
  };
  const side = ARTIFACT_DEFAULTS.grepWindowChars;
  const matches: ArtifactMatch[] = [];
  let total = 0;
  let lines = 0;
  for (let n = 0; n < index.count; n++) {
    const line = index.line(n);
    const matcher = pattern.matcher(line);
    if (!matcher.find()) continue;
    lines++;
    if (line.length <= ARTIFACT_DEFAULTS.maxLineChars) {
      let count = 1;
      while (matcher.find()) count++;
      total += count;
      if (matches.length < maxMatches) matches.push({ line: n, text: line, ...(count > 1 ? { count } : {}), ...around(n) });
      continue;
    }
    do {
      total++;
      if (matches.length >= maxMatches) continue;
      const at = matcher.start();
      const fromChar = Math.max(0, at - side);
      const toChar = Math.min(line.length, Math.max(matcher.end(), at + 1) + side);
      matches.push({ line: n, text: line.slice(fromChar, toChar), window: { fromChar, matchAt: at, length: line.length }, ...around(n) });
      // An empty match would be found again at the same place: RE2's matcher moves on by itself.
    } while (matcher.find());
  }
  return { artifact, matches, total, lines };
}
