import { randomBytes } from 'node:crypto';
import { RE2JS } from 're2js';
import { estimateTokens } from '../agent/token-count.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { keptBytes, taskLimitError } from './artifact-limit.ts';
import { countLines, indexLines, type LineIndex, artifactTokens } from './artifact-text.ts';
import { grepLines } from './artifact-grep.ts';
import { checkCharOffset, checkRead, pageSource, readPage } from './artifact-page.ts';
import { jsonLayoutOf, type RecordsLayout } from './artifact-records.ts';
import type { ArtifactBackend, ArtifactInfo, StoredArtifact } from './artifact-types.ts';

/** Options of {@link createArtifactStore}. */
export interface ArtifactStoreOptions {
  /** Where the artifacts are kept (a task's store). @default in this store's memory, for as long as it lives */
  readonly backend?: ArtifactBackend;
  /**
   * Bytes of artifacts kept at most in this store's own memory (without `backend`; a task store has its own
   * caps); one more is refused with `ARTIFACT_LIMIT`. @default ARTIFACT_DEFAULTS.maxBytesPerTask (1 GiB)
   */
  readonly maxBytes?: number;
  /** Counts an artifact's tokens (a run gives its model's counter). @default `estimateTokens`, a conservative estimate */
  readonly countTokens?: (text: string) => number;
  /** Tokens of a page `read` gives at most (a run keeps it under its artifact threshold). @default ARTIFACT_DEFAULTS.pageTokens */
  readonly pageTokens?: number;
}

/** A line of a page: whole, or from `fromChar` on when it is too long for one page. */
export interface SliceLine {
  /** The line's number, 0-based. */
  readonly n: number;
  readonly text: string;
  /** Given only for a line read in part: where `text` starts in the line, and the line's length, in characters. */
  readonly fromChar?: number;
  readonly length?: number;
}

/** A page of an artifact, as `klym__read_artifact` answers: lines from `offset`, and where to read on. */
export interface ArtifactSlice {
  readonly artifact: ArtifactInfo;
  /** The first line given, 0-based. */
  readonly offset: number;
  readonly lines: readonly SliceLine[];
  /** Where the next page starts (a line, and a character in it when the page stopped inside it); absent at the end. */
  readonly next?: { readonly offset: number; readonly charOffset?: number };
}

/** Where to read an artifact from: a line, a character in it, and lines at most. */
export interface ReadRequest {
  /** @default 0 */
  readonly offset?: number;
  /** Where to start in line `offset`, in characters. @default 0 */
  readonly charOffset?: number;
  /** @default ARTIFACT_DEFAULTS.readLines, at most ARTIFACT_DEFAULTS.maxReadLines */
  readonly limit?: number;
  /** Tokens of the page at most, for a reader that is not a model (the dashboard). @default the store's `pageTokens` */
  readonly pageTokens?: number;
}

/**
 * A match of `klym__grep_artifact`: its line (0-based) and the lines around it. A short line is given
 * whole, once however many matches it holds (`count`); in a long line each match is one, shown as a
 * window of the line around it (`window`).
 */
export interface ArtifactMatch {
  readonly line: number;
  readonly text: string;
  /** Matches in this line's `text`, when more than one. */
  readonly count?: number;
  /** For a long line: where the window starts, where the match starts, and the line's length, in characters. */
  readonly window?: { readonly fromChar: number; readonly matchAt: number; readonly length: number };
  readonly before: readonly string[];
  readonly after: readonly string[];
}

/** What `klym__grep_artifact` found. */
export interface ArtifactGrep {
  readonly artifact: ArtifactInfo;
  readonly matches: readonly ArtifactMatch[];
  /** Matches in all (several in one line count as several), of which `matches` show the first. */
  readonly total: number;
  /** Lines holding a match. */
  readonly lines: number;
}

/** How a text is kept: as records when it is JSON holding an array of objects (`auto`), or as it is. */
export type KeepAs = 'auto' | 'text' | RecordsLayout;

/** A task's artifacts: tool results kept whole, read by slices and searched instead of sent to the model. */
export interface ArtifactStore {
  /**
   * Keeps `text`, a result of `tool`, as a new artifact: JSON holding an array of objects as records
   * (`recordsOf`), the original text kept beside them; any other text as it is.
   * @throws {KlymError} `ARTIFACT_LIMIT` when the backend refuses it: its task's cap, or its store's, would be passed
   */
  put(tool: string, text: string, as?: KeepAs): Promise<ArtifactInfo>;
  /**
   * A page of lines from `offset` (and `charOffset` in it): at most `limit` lines, and at most the store's
   * `pageTokens`; a line too long for a page is given in parts. `next` says where to read on.
   * @throws {KlymError} `ARTIFACT_NOT_FOUND`; `INVALID_ARGUMENT` for an offset past the end or a bad limit
   */
  read(id: string, request?: ReadRequest): Promise<ArtifactSlice>;
  /**
   * The matches of `pattern` (RE2 syntax, linear time: no pattern can make it hang), with up to
   * `context` lines before and after each, the first `maxMatches` of them.
   * @throws {KlymError} `ARTIFACT_NOT_FOUND`; `INVALID_ARGUMENT` for a pattern RE2 refuses, naming why
   */
  grep(id: string, pattern: string, options?: { readonly context?: number; readonly maxMatches?: number }): Promise<ArtifactGrep>;
  /** The artifact's lines, indexed. @throws {KlymError} `ARTIFACT_NOT_FOUND` */
  lines(id: string): Promise<{ readonly artifact: ArtifactInfo; readonly index: LineIndex }>;
  /** Every artifact kept, oldest first. */
  list(): Promise<readonly ArtifactInfo[]>;
}

/**
 * Artifacts kept in memory, for a run that has no task store (`klym run`, a library's `runAgent`): at most
 * `maxBytes` of them (an artifact counts its bytes, and its original's when kept), checked as it is saved.
 * @throws {KlymError} `CONFIG_INVALID` for a `maxBytes` that is not a positive integer; from `save`,
 * `ARTIFACT_LIMIT` when `maxBytes` would be passed
 */
export function createMemoryArtifacts(options: { readonly maxBytes?: number } = {}): ArtifactBackend {
  const { maxBytes = ARTIFACT_DEFAULTS.maxBytesPerTask } = options;
  if (!Number.isInteger(maxBytes) || maxBytes <= 0)
    throw new KlymError('CONFIG_INVALID', `Expected the artifacts' \`maxBytes\` to be a positive integer, got ${maxBytes}`);
  const kept = new Map<string, StoredArtifact>();
  let used = 0;
  return {
    async save(artifact) {
      // Checked and added in one synchronous turn: of two saves at once, the second sees the first.
      const bytes = keptBytes(artifact) - (kept.has(artifact.id) ? keptBytes(kept.get(artifact.id) as StoredArtifact) : 0);
      if (used + bytes > maxBytes) throw taskLimitError(artifact, maxBytes, used);
      kept.set(artifact.id, artifact);
      used += bytes;
    },
    load: async (id) => kept.get(id),
    list: async () => [...kept.values()].map(({ text: _text, original: _original, ...info }) => info),
  };
}

/**
 * An artifact store over `backend`. It keeps the lines of the artifact read last indexed, so that paging
 * through one reads it from its backend once.
 *
 * @throws {KlymError} `CONFIG_INVALID` for a `maxBytes` that is not a positive integer
 * @example
 * ```ts
 * const artifacts = createArtifactStore()
 * const { id } = await artifacts.put('fs__read_text_file', hugeLog)
 * const errors = await artifacts.grep(id, 'ERROR .*code=5\\d\\d', { context: 1 })
 * ```
 */
export function createArtifactStore(options: ArtifactStoreOptions = {}): ArtifactStore {
  const maxBytes = options.maxBytes ?? ARTIFACT_DEFAULTS.maxBytesPerTask;
  if (!Number.isInteger(maxBytes) || maxBytes <= 0)
    throw new KlymError('CONFIG_INVALID', `Expected the artifacts' \`maxBytes\` to be a positive integer, got ${maxBytes}`);
  const backend = options.backend ?? createMemoryArtifacts({ maxBytes });
  const countTokens = options.countTokens ?? estimateTokens;
  const pageTokens = options.pageTokens ?? ARTIFACT_DEFAULTS.pageTokens;
  if (!Number.isInteger(pageTokens) || pageTokens < 100)
    throw new KlymError('CONFIG_INVALID', `Expected the artifacts' \`pageTokens\` to be an integer of 100 or more, got ${pageTokens}`);
  let last: { readonly artifact: ArtifactInfo; readonly index: LineIndex } | undefined;

  const lines = async (id: string): Promise<{ readonly artifact: ArtifactInfo; readonly index: LineIndex }> => {
    if (last?.artifact.id === id) return last;
    const stored = typeof id === 'string' ? await backend.load(id) : undefined;
    if (stored === undefined) {
      const known = (await backend.list()).map((artifact) => artifact.id);
      const hint = known.length === 0 ? 'this task has none' : `this task has ${known.join(', ')}`;
      throw new KlymError('ARTIFACT_NOT_FOUND', `No artifact "${String(id).slice(0, 80)}" in this task: ${hint}`);
    }
    const { text, original: _original, ...artifact } = stored;
    last = { artifact, index: indexLines(text) };
    return last;
  };

  return {
    async put(tool, text, as = 'auto') {
      const shape = as === 'text' ? undefined : as === 'auto' ? jsonLayoutOf(text) : as;
      const layout = shape === 'document' ? undefined : shape;
      const lineText = layout?.text ?? text;
      const original = as === 'auto' && layout !== undefined ? text : undefined;
      const bytes = Buffer.byteLength(lineText);
      // The cap is the backend's, checked as it saves (ARTIFACT_LIMIT): two puts at once cannot both pass it.
      const info: ArtifactInfo = {
        id: `art_${randomBytes(6).toString('hex')}`,
        tool,
        bytes,
        lines: countLines(lineText),
        tokens: artifactTokens(lineText, countTokens),
        createdAt: new Date().toISOString(),
        ...(layout === undefined ? {} : { records: original === undefined ? { ...layout.records, originalBytes: 0 } : layout.records }),
        ...(shape === 'document' ? { json: 'document' as const } : {}),
      };
      await backend.save({ ...info, text: lineText, ...(original === undefined ? {} : { original }) });
      // What is kept is read next, as a rule: its reference's preview first.
      last = { artifact: info, index: indexLines(lineText) };
      return info;
    },
    async read(id, request = {}) {
      const { artifact, index } = await lines(id);
      const { offset, charOffset, limit } = checkRead(id, index.count, request);
      checkCharOffset(offset, charOffset, index.count === 0 ? 0 : index.line(offset).length);
      return readPage(artifact, pageSource(index), offset, charOffset, limit, request.pageTokens ?? pageTokens, countTokens);
    },
    async grep(id, pattern, grepOptions = {}) {
      const { artifact, index } = await lines(id);
      let compiled: RE2JS;
      try {
        compiled = RE2JS.compile(pattern);
      } catch (error) {
        throw new KlymError(
          'INVALID_ARGUMENT',
          `\`pattern\`: ${error instanceof Error ? error.message : String(error)} (RE2 syntax: no backreferences or lookarounds)`,
        );
      }
      const context = Math.min(Math.max(0, Math.trunc(grepOptions.context ?? 0)), ARTIFACT_DEFAULTS.maxGrepContext);
      const maxMatches = Math.min(Math.max(1, Math.trunc(grepOptions.maxMatches ?? ARTIFACT_DEFAULTS.grepMatches)), ARTIFACT_DEFAULTS.maxGrepMatches);
      return grepLines(artifact, index, compiled, context, maxMatches);
    },
    lines,
    list: () => backend.list(),
  };
}
