import { randomBytes } from 'node:crypto';
import { RE2JS } from 're2js';
import { estimateTokens } from '../agent/token-count.ts';
import { ARTIFACT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { clipLine, countLines, indexLines, type LineIndex } from './artifact-text.ts';
import type { ArtifactBackend, ArtifactInfo, StoredArtifact } from './artifact-types.ts';

/** Options of {@link createArtifactStore}. */
export interface ArtifactStoreOptions {
  /** Where the artifacts are kept (a task's store). @default in this store's memory, for as long as it lives */
  readonly backend?: ArtifactBackend;
  /** Bytes of artifacts kept at most; one more is refused with `ARTIFACT_LIMIT`. @default ARTIFACT_DEFAULTS.maxBytesPerTask (1 GiB) */
  readonly maxBytes?: number;
  /** Counts an artifact's tokens (a run gives its model's counter). @default `estimateTokens`, a conservative estimate */
  readonly countTokens?: (text: string) => number;
}

/** Lines of an artifact, as `klym__read_artifact` answers. */
export interface ArtifactSlice {
  readonly artifact: ArtifactInfo;
  /** The first line given, 0-based. */
  readonly offset: number;
  readonly lines: readonly string[];
  /** Whether lines follow the last one given. */
  readonly more: boolean;
}

/** A match of `klym__grep_artifact`: its line number (0-based), and the lines around it. */
export interface ArtifactMatch {
  readonly line: number;
  readonly text: string;
  readonly before: readonly string[];
  readonly after: readonly string[];
}

/** What `klym__grep_artifact` found. */
export interface ArtifactGrep {
  readonly artifact: ArtifactInfo;
  readonly matches: readonly ArtifactMatch[];
  /** Matching lines in all, of which `matches` are the first. */
  readonly total: number;
}

/** A task's artifacts: tool results kept whole, read by slices and searched instead of sent to the model. */
export interface ArtifactStore {
  /**
   * Keeps `text`, a result of `tool`, as a new artifact.
   * @throws {KlymError} `ARTIFACT_LIMIT` when the task's artifacts would pass `maxBytes`
   */
  put(tool: string, text: string): Promise<ArtifactInfo>;
  /**
   * Lines `offset` to `offset + limit - 1` (0-based), each cut at `ARTIFACT_DEFAULTS.maxLineChars`.
   * @throws {KlymError} `ARTIFACT_NOT_FOUND`; `INVALID_ARGUMENT` for an offset past the end or a bad limit
   */
  read(id: string, offset?: number, limit?: number): Promise<ArtifactSlice>;
  /**
   * The lines matching `pattern` (RE2 syntax, linear time: no pattern can make it hang), with up to
   * `context` lines before and after each, the first `maxMatches` of them.
   * @throws {KlymError} `ARTIFACT_NOT_FOUND`; `INVALID_ARGUMENT` for a pattern RE2 refuses, naming why
   */
  grep(id: string, pattern: string, options?: { readonly context?: number; readonly maxMatches?: number }): Promise<ArtifactGrep>;
  /** The artifact's lines, indexed. @throws {KlymError} `ARTIFACT_NOT_FOUND` */
  lines(id: string): Promise<{ readonly artifact: ArtifactInfo; readonly index: LineIndex }>;
  /** Every artifact kept, oldest first. */
  list(): Promise<readonly ArtifactInfo[]>;
}

/** Artifacts kept in memory, for a run that has no task store (`klym run`, a library's `runAgent`). */
export function createMemoryArtifacts(): ArtifactBackend {
  const kept = new Map<string, StoredArtifact>();
  return {
    save: async (artifact) => void kept.set(artifact.id, artifact),
    load: async (id) => kept.get(id),
    list: async () => [...kept.values()].map(({ text: _text, ...info }) => info),
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
  const backend = options.backend ?? createMemoryArtifacts();
  const maxBytes = options.maxBytes ?? ARTIFACT_DEFAULTS.maxBytesPerTask;
  if (!Number.isInteger(maxBytes) || maxBytes <= 0) throw new KlymError('CONFIG_INVALID', `Expected the artifacts' \`maxBytes\` to be a positive integer, got ${maxBytes}`);
  const countTokens = options.countTokens ?? estimateTokens;
  let last: { readonly artifact: ArtifactInfo; readonly index: LineIndex } | undefined;

  const lines = async (id: string): Promise<{ readonly artifact: ArtifactInfo; readonly index: LineIndex }> => {
    if (last?.artifact.id === id) return last;
    const stored = typeof id === 'string' ? await backend.load(id) : undefined;
    if (stored === undefined) {
      const known = (await backend.list()).map((artifact) => artifact.id);
      const hint = known.length === 0 ? 'this task has none' : `this task has ${known.join(', ')}`;
      throw new KlymError('ARTIFACT_NOT_FOUND', `No artifact "${String(id).slice(0, 80)}" in this task: ${hint}`);
    }
    const { text, ...artifact } = stored;
    last = { artifact, index: indexLines(text) };
    return last;
  };

  return {
    async put(tool, text) {
      const bytes = Buffer.byteLength(text);
      const used = (await backend.list()).reduce((sum, artifact) => sum + artifact.bytes, 0);
      if (used + bytes > maxBytes) {
        throw new KlymError('ARTIFACT_LIMIT', `Keeping this ${bytes}-byte result of ${tool} would pass the task's ${maxBytes} bytes of artifacts (${used} kept)`);
      }
      const artifact: StoredArtifact = { id: `art_${randomBytes(6).toString('hex')}`, tool, bytes, lines: countLines(text), tokens: countTokens(text), createdAt: new Date().toISOString(), text };
      await backend.save(artifact);
      const { text: _text, ...info } = artifact;
      return info;
    },
    async read(id, offset = 0, limit = ARTIFACT_DEFAULTS.readLines) {
      const { artifact, index } = await lines(id);
      if (!Number.isInteger(offset) || offset < 0) throw new KlymError('INVALID_ARGUMENT', `\`offset\`: expected a line number of 0 or more, got ${offset}`);
      if (offset >= index.count && !(offset === 0 && index.count === 0)) {
        throw new KlymError('INVALID_ARGUMENT', `\`offset\`: ${offset} is past the end of ${id}, which has ${index.count} lines (0 to ${index.count - 1})`);
      }
      if (!Number.isInteger(limit) || limit < 1) throw new KlymError('INVALID_ARGUMENT', `\`limit\`: expected a positive number of lines, got ${limit}`);
      const end = Math.min(index.count, offset + Math.min(limit, ARTIFACT_DEFAULTS.maxReadLines));
      const slice: string[] = [];
      for (let n = offset; n < end; n++) slice.push(clipLine(index.line(n), ARTIFACT_DEFAULTS.maxLineChars));
      return { artifact, offset, lines: slice, more: end < index.count };
    },
    async grep(id, pattern, grepOptions = {}) {
      const { artifact, index } = await lines(id);
      let compiled: RE2JS;
      try {
        compiled = RE2JS.compile(pattern);
      } catch (error) {
        throw new KlymError('INVALID_ARGUMENT', `\`pattern\`: ${error instanceof Error ? error.message : String(error)} (RE2 syntax: no backreferences or lookarounds)`);
      }
      const context = Math.min(Math.max(0, Math.trunc(grepOptions.context ?? 0)), ARTIFACT_DEFAULTS.maxGrepContext);
      const maxMatches = Math.min(Math.max(1, Math.trunc(grepOptions.maxMatches ?? ARTIFACT_DEFAULTS.grepMatches)), ARTIFACT_DEFAULTS.maxGrepMatches);
      const shown = (n: number): string => clipLine(index.line(n), ARTIFACT_DEFAULTS.maxLineChars);
      const matches: ArtifactMatch[] = [];
      let total = 0;
      for (let n = 0; n < index.count; n++) {
        if (!compiled.matcher(index.line(n)).find()) continue;
        total++;
        if (matches.length >= maxMatches) continue;
        const before: string[] = [];
        for (let k = Math.max(0, n - context); k < n; k++) before.push(shown(k));
        const after: string[] = [];
        for (let k = n + 1; k <= Math.min(index.count - 1, n + context); k++) after.push(shown(k));
        matches.push({ line: n, text: shown(n), before, after });
      }
      return { artifact, matches, total };
    },
    lines,
    list: () => backend.list(),
  };
}
