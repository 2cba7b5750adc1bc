import type { QueryAnswer } from './artifact-query.ts';
import type { ColumnType } from './record-types.ts';

/** What is known of an artifact without reading it: a tool result kept whole, out of the conversation. */
export interface ArtifactInfo {
  /** `art_` and 12 hex digits, unique within its task; also its table's name in `klym__query_artifact`. */
  readonly id: string;
  /** The namespaced tool whose result it is (`fs__read_text_file`, `klym__grep_artifact`). */
  readonly tool: string;
  /** UTF-8 bytes of its text (its lines, as the line tools read them). */
  readonly bytes: number;
  /** Lines of its text (a last line without a newline counts). */
  readonly lines: number;
  /** Tokens of its text, as the run counts them (past two million characters, from samples: `artifactTokens`). */
  readonly tokens: number;
  /** ISO 8601. */
  readonly createdAt: string;
  /** How its lines read; absent on artifacts kept before there were records: `text`. */
  readonly records?: ArtifactRecords;
  /**
   * `document` when its text is one JSON document that is not records (no array holds most of it): beside its
   * lines' table it is then `<id>_doc` (one row, `doc`: its JSON text) and `<id>_paths` (`path`, `key`, `type`, `value`).
   */
  readonly json?: 'document';
}

/**
 * A result that was JSON, kept as records: the elements of its biggest array of objects one per line
 * (compact JSON), after an envelope line holding the rest of the document when the array was not all of it.
 */
export interface ArtifactRecords {
  /** How many records. */
  readonly count: number;
  /** The line of the first record: 1 after an envelope line, 0 when the array was the whole document. */
  readonly firstLine: number;
  /** Where the array was in the document, as a path of keys (`results`); empty for the document itself. */
  readonly path: readonly string[];
  /** The keys of the first record, nested objects' keys as `parent.child`, at most {@link MAX_RECORD_KEYS}. */
  readonly keys: readonly string[];
  /** UTF-8 bytes of the original JSON text, kept beside the records and given back byte for byte. */
  readonly originalBytes: number;
  /**
   * Each key of any record with the type of all its values, as its table's columns are typed (`json_transform`'s
   * structure: `BIGINT`, `DOUBLE`, `VARCHAR`, `{ nested: … }`, `[element]`, `JSON` where values disagree);
   * absent on artifacts kept before, or records that are not objects.
   */
  readonly types?: { readonly [key: string]: ColumnType };
}

/** Keys of a record named in its artifact's description, at most: enough to write a query at once. */
export const MAX_RECORD_KEYS = 40;

/** An artifact with its text, as a store keeps it. */
export interface StoredArtifact extends ArtifactInfo {
  /** Its lines: the result's text, or for records, the envelope and one record per line. */
  readonly text: string;
  /** For records, the result's JSON text as the tool gave it. */
  readonly original?: string;
}

/**
 * Where a task's artifacts are kept: its task store (`TaskStore.saveArtifact`, …), or a run's memory. Every
 * method is scoped to one task: an id of another task's artifact is not found.
 */
export interface ArtifactBackend {
  /** Keeps `artifact` whole; durable once it resolves. */
  save(artifact: StoredArtifact): Promise<void>;
  /** The artifact with its text; `undefined` for an id this task has not. */
  load(id: string): Promise<StoredArtifact | undefined>;
  /** Every artifact of the task, oldest first, without their text. */
  list(): Promise<readonly ArtifactInfo[]>;
  /**
   * Runs SQL over the task's artifacts in the task's own DuckDB (`klym__query_artifact`), where the task's
   * store is. A backend without it (a run's memory) gets a DuckDB of the run's own.
   */
  query?(sql: string, options?: QueryPage & { readonly signal?: AbortSignal }): Promise<QueryAnswer>;
}

/** How much of a query's answer its caller reads: its page, and whether a bigger answer keeps its first rows. */
export interface QueryPage {
  /** Characters of rows (as compact JSON) the page holds at most. @default QUERY_DEFAULTS.pageChars */
  readonly pageChars?: number;
  /** Whether an answer bigger than its page keeps its first rows as JSON lines (`QueryAnswer.kept`). @default false */
  readonly keep?: boolean;
}

/** `page` without its signal or anything else, as it crosses to the main thread. */
export const pageOf = (page: QueryPage): QueryPage => ({
  ...(page.pageChars === undefined ? {} : { pageChars: page.pageChars }),
  ...(page.keep === undefined ? {} : { keep: page.keep }),
});
