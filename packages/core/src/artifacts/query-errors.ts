// What a query that gave no answer says: stopped, its process dead, DuckDB's error, or its artifact not loaded.
import { KlymError } from '../errors.ts';
import type { ProcessError } from './query-messages.ts';
import type { QuerySource } from './query-text.ts';
import { countText } from '../internal/count-text.ts';

/** Why Klym stopped a query: its signal, its time limit, or its processes closing. */
export type Stop = 'signal' | 'timeout' | 'close';

/** Why Klym killed a query process, when it did. */
export type ProcessKill = { readonly reason: 'memory'; readonly rssMiB: number } | { readonly reason: 'stop' };

/** The memory a query process may use: its DuckDB's, and the margin the process has past it. */
export interface ProcessWalls {
  readonly memoryMiB: number;
  readonly marginMiB: number;
}

/** A query Klym stopped (`stop`; none yet is its time limit), as its caller is told. */
export function stoppedError(pending: { readonly stop?: Stop; readonly job: { readonly timeoutMs: number } }): KlymError {
  switch (pending.stop) {
    case 'signal':
      return new KlymError('ABORTED', 'The query was cancelled');
    case 'close':
      return new KlymError('ABORTED', 'The query was stopped: Klym is closing its query processes');
    default:
      return new KlymError(
        'QUERY_FAILED',
        `The query ran past its time limit of ${countText(pending.job.timeoutMs)} ms (\`timeoutMs\`) and was stopped: filter or aggregate sooner, or query less at once`,
      );
  }
}

/** A query whose process ended under it: killed past its memory, naming the limits, or dead, with its last words. */
export function deathError(
  killed: ProcessKill | undefined,
  code: number | null,
  signal: NodeJS.Signals | null,
  stderr: string,
  walls: ProcessWalls,
): KlymError {
  if (killed?.reason === 'memory') {
    return new KlymError(
      'QUERY_FAILED',
      `The query needed more memory than a query process may use: ${walls.memoryMiB} MiB (\`memoryMiB\`) plus ${walls.marginMiB} MiB for the process; ` +
        `it reached ${Math.round(killed.rssMiB)} MiB and its process was killed. Filter or aggregate sooner, select fewer or shorter columns, or add a LIMIT`,
    );
  }
  const last = stderr.trim().split('\n').slice(-3).join(' / ');
  return new KlymError(
    'QUERY_FAILED',
    `The query's process ended while it ran (${signal === null ? `exit code ${String(code)}` : signal})${last === '' ? '' : `: ${last.slice(0, 500)}`}`,
  );
}

/** The task's store failed to give the text of artifact `table` while a process loaded it. */
export function loadError(table: string, error: unknown): KlymError {
  return new KlymError(
    'QUERY_FAILED',
    `Loading artifact ${table} failed: the task's store did not give its text (${error instanceof Error ? error.message : String(error)})`,
    {
      cause: error,
    },
  );
}

/** A process's error as a KlymError: DuckDB's out-of-memory naming the limit, a missing `art_` table naming the task's. */
export async function queryFailure(pending: { readonly job: { readonly source: QuerySource } }, error: ProcessError, walls: ProcessWalls): Promise<KlymError> {
  if (error.code !== 'QUERY_FAILED') return new KlymError(error.code, error.message);
  if (error.message.startsWith('Out of Memory Error')) {
    // DuckDB's advice after its first paragraph is to SET a higher limit, which is locked here.
    return new KlymError(
      'QUERY_FAILED',
      `The query needed more memory than the task's DuckDB may use, ${walls.memoryMiB} MiB (\`memoryMiB\`, loaded tables included): filter or aggregate sooner, select fewer columns. DuckDB said: ${error.message.split('\n\n')[0]}`,
    );
  }
  const notDocument = MISSING_DOCUMENT_TABLE.exec(error.message);
  if (notDocument !== null) {
    const [, id, suffix] = notDocument as unknown as [string, string, string];
    return new KlymError(
      'QUERY_FAILED',
      `${id.toLowerCase()} is not a JSON document kept whole, so it has no table ${id.toLowerCase()}_${suffix.toLowerCase()}: its lines are table ${id.toLowerCase()} (n, line), or its records' columns`,
    );
  }
  const missing = MISSING_TABLE.exec(error.message)?.[1]?.toLowerCase();
  if (missing !== undefined) {
    const ids = (await pending.job.source.list().catch(() => [])).map((artifact) => artifact.id);
    if (!ids.includes(missing)) {
      const tables = ids.length === 0 ? 'it has none yet' : `its tables are ${ids.join(', ')}`;
      return new KlymError('ARTIFACT_NOT_FOUND', `This task has no artifact ${missing}, so no table of that name: ${tables}`);
    }
  }
  return new KlymError(
    'QUERY_FAILED',
    error.message.startsWith('Loading artifact') || error.message.startsWith('BEGIN') ? error.message : `The query failed. DuckDB said: ${error.message}`,
  );
}

/** DuckDB's error for a table that is not there, naming an artifact's. */
const MISSING_TABLE = /^Catalog Error: Table with name (art_[0-9a-f]{12}) does not exist/i;

/** DuckDB's error for a JSON document's table that an artifact has not. */
const MISSING_DOCUMENT_TABLE = /^Catalog Error: Table with name (art_[0-9a-f]{12})_(doc|paths) does not exist/i;
