import type { QueryAnswer, QueryColumn } from './artifact-query.ts';

export type { QueryColumn };
import type { ArtifactRecords } from './artifact-types.ts';

/** A query's limits inside its process, as the DuckDB and the answer apply them. */
export interface QueryLimits {
  /** DuckDB's `memory_limit` for the task's database, in MiB. */
  readonly memoryMiB: number;
  readonly threads: number;
  /** Rows counted at most: past it the answer says "more than". */
  readonly maxRows: number;
  /** Characters of rows (as compact JSON) the answer's page holds at most; the first row is always given. */
  readonly pageChars: number;
  /** Characters of JSON lines kept for a table of the answer (`keep`), at most; 0 keeps none. */
  readonly keepChars: number;
}

/** What a query process answers for a query: a `QueryAnswer`, its rows a page long. */
export type ProcessAnswer = QueryAnswer;

/** An error as it crosses the process: its code and message. */
export interface ProcessError {
  readonly code: 'QUERY_FAILED' | 'INVALID_ARGUMENT' | 'ABORTED';
  readonly message: string;
}

/** From the serving process to a query process. */
export type ToQueryProcess =
  | {
      readonly type: 'query';
      readonly id: number;
      /** The database: one per task (its `ArtifactQuery`), opened at its first query. */
      readonly database: string;
      readonly sql: string;
      readonly limits: QueryLimits;
    }
  | { readonly type: 'describe'; readonly id: number; readonly database: string; readonly table: string; readonly limits: QueryLimits }
  /** Interrupts query `id` (DuckDB's interrupt, said again until it ends). */
  | { readonly type: 'interrupt'; readonly id: number }
  /** Closes a database and its tables. */
  | { readonly type: 'drop'; readonly database: string }
  /** The artifact a `need` asked for: its kind, or that the task has none of that id. */
  | { readonly type: 'artifact'; readonly id: number; readonly table: string; readonly found: false }
  | {
      readonly type: 'artifact';
      readonly id: number;
      readonly table: string;
      readonly found: true;
      readonly records?: ArtifactRecords;
      /** `document` for a JSON document that is not records. */
      readonly json?: 'document';
      /** Characters of its text (its last newline left out). */
      readonly chars: number;
    }
  /** A slice of whole lines of the artifact's text, from `from`; `end` is where the next starts (past its newline). */
  | { readonly type: 'slice'; readonly id: number; readonly text: string; readonly end: number };

/** From a query process to the serving process. */
export type FromQueryProcess =
  | { readonly type: 'ready' }
  /** Query `id` names table `table` that its database has not loaded: the artifact is asked for. */
  | { readonly type: 'need'; readonly id: number; readonly table: string }
  /** The next slice of the artifact being loaded for query `id`, from character `from`. */
  | { readonly type: 'next'; readonly id: number; readonly from: number }
  /** The artifact being loaded for query `id` is loaded (or failed): its text may go. */
  | { readonly type: 'loaded'; readonly id: number }
  | { readonly type: 'answer'; readonly id: number; readonly answer: ProcessAnswer }
  | { readonly type: 'described'; readonly id: number; readonly columns: readonly QueryColumn[] }
  | { readonly type: 'failed'; readonly id: number; readonly error: ProcessError };
