import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { TASK_DEFAULTS } from '../../../defaults.ts';
import { KlymError } from '../../../errors.ts';
import {
  TASK_STATUSES,
  TERMINAL_STATUSES,
  type TaskFilter,
  type TaskListPage,
  type TaskPageRequest,
  type TaskPatch,
  type TaskRecord,
  type TaskStatus,
} from '../task-types.ts';
import { inTransaction } from './transaction.ts';
import { positiveInteger } from '../../../internal/positive.ts';

/** Task records in the `tasks` table: the whole record as JSON, and as columns what is queried. */
export interface TaskTable {
  insert(task: TaskRecord): TaskRecord;
  get(id: string): TaskRecord | undefined;
  findByIdempotencyKey(principal: string, idempotencyKey: string): TaskRecord | undefined;
  /** Applies `patch` when `accept` takes the task's status; `undefined` when it did not apply. */
  change(id: string, patch: TaskPatch, accept: (status: TaskStatus) => boolean): TaskRecord | undefined;
  /** Applies the patch `edit` makes of the task as stored, read and written in one transaction; `undefined` when it is not kept. */
  edit(id: string, edit: (task: TaskRecord) => TaskPatch): TaskRecord | undefined;
  list(filter: TaskFilter, page: TaskPageRequest): TaskListPage;
  counts(): Record<TaskStatus, number>;
  /** Tasks pending or running, and finished ones whose write-back was under way: oldest first. */
  unfinished(): TaskRecord[];
  /** Deletes at most `limit` finished tasks that finished before `before` (with their logs and checkpoints). */
  evict(before: Date, limit: number): TaskRecord[];
}

const ALL_STATUSES: readonly TaskStatus[] = TASK_STATUSES;
const sqlList = (statuses: readonly TaskStatus[]): string => statuses.map((status) => `'${status}'`).join(', ');

/** Creates the {@link TaskTable} of `db`, whose schema is current. */
export function createTaskTable(db: DatabaseSync): TaskTable {
  const insert = db.prepare('INSERT INTO tasks (id, principal, status, created_at, finished_at, idempotency_key, record) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const selectById = db.prepare('SELECT record FROM tasks WHERE id = ?');
  const selectByKey = db.prepare('SELECT record FROM tasks WHERE principal = ? AND idempotency_key = ?');
  const updateRecord = db.prepare('UPDATE tasks SET status = ?, finished_at = ?, record = ? WHERE id = ? AND status = ?');
  const selectCounts = db.prepare('SELECT status, count(*) AS count FROM tasks GROUP BY status');
  // Read once, at start-up, so finding write-backs under way by scanning the records needs no index.
  const selectUnfinished = db.prepare(
    `SELECT record FROM tasks WHERE status IN (${sqlList(['pending', 'running'])}) OR json_extract(record, '$.writeBack.status') = 'pending' ORDER BY created_at, seq`,
  );
  // Through tasks_by_status: the finished tasks are few, since this is what keeps them few.
  const deleteFinished = db.prepare(
    `DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks WHERE finished_at < ? AND status IN (${sqlList(TERMINAL_STATUSES)}) LIMIT ?) RETURNING record`,
  );
  // One pair of statements per shape of filter, each prepared the first time it is used.
  const listStatements = new Map<string, { page: StatementSync; total: StatementSync }>();

  const listStatementsFor = (filter: TaskFilter, after: boolean) => {
    const key = `${filter.principal !== undefined}/${filter.status !== undefined}/${after}`;
    let statements = listStatements.get(key);
    if (statements === undefined) {
      const conditions = [...(filter.principal === undefined ? [] : ['principal = ?']), ...(filter.status === undefined ? [] : ['status = ?'])];
      const where = (more: readonly string[]): string => (conditions.length + more.length === 0 ? '' : `WHERE ${[...conditions, ...more].join(' AND ')}`);
      statements = {
        page: db.prepare(
          `SELECT seq, created_at AS createdAt, record FROM tasks ${where(after ? ['(created_at, seq) < (?, ?)'] : [])} ORDER BY created_at DESC, seq DESC LIMIT ?`,
        ),
        total: db.prepare(`SELECT count(*) AS count FROM tasks ${where([])}`),
      };
      listStatements.set(key, statements);
    }
    return statements;
  };

  const get = (id: string): TaskRecord | undefined => parseRow(selectById.get(id));

  const change = (task: TaskRecord | undefined, patch: TaskPatch, accept: (status: TaskStatus) => boolean): TaskRecord | undefined => {
    if (task === undefined || !accept(task.status)) return undefined;
    const next: TaskRecord = { ...task, ...patch, id: task.id, principal: task.principal, request: task.request, createdAt: task.createdAt };
    updateRecord.run(next.status, utcOrNull(next.finishedAt), JSON.stringify(next), task.id, task.status);
    return next;
  };

  return {
    insert(task) {
      const key = task.request.idempotencyKey;
      // Synchronous from check to write, on a connection no other process can use: nothing runs between.
      if (key !== undefined) {
        const existing = parseRow(selectByKey.get(task.principal, key));
        if (existing !== undefined) return existing;
      }
      if (selectById.get(task.id) !== undefined)
        throw new KlymError('INVALID_ARGUMENT', `Cannot insert task ${task.id}: a task with that id is already stored`);
      insert.run(task.id, task.principal, task.status, utc(task.createdAt), utcOrNull(task.finishedAt), key ?? null, JSON.stringify(task));
      return task;
    },
    get,
    findByIdempotencyKey(principal, idempotencyKey) {
      return parseRow(selectByKey.get(principal, idempotencyKey));
    },
    change: (id, patch, accept) => change(get(id), patch, accept),
    edit(id, edit) {
      return inTransaction(db, () => {
        const task = get(id);
        return task === undefined ? undefined : change(task, edit(task), () => true);
      });
    },
    list(filter, page) {
      const limit = positiveInteger('limit', page.limit ?? TASK_DEFAULTS.listPageSize, 'INVALID_ARGUMENT');
      const after = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
      const statements = listStatementsFor(filter, after !== undefined);
      const args: SQLInputValue[] = [...(filter.principal === undefined ? [] : [filter.principal]), ...(filter.status === undefined ? [] : [filter.status])];
      const total = Number((statements.total.get(...args) as { count: number }).count);
      const rows = statements.page.all(...args, ...(after === undefined ? [] : after), limit + 1) as { seq: number; createdAt: string; record: string }[];
      const tasks = rows.slice(0, limit).map((row) => JSON.parse(row.record) as TaskRecord);
      const last = rows.length > limit ? rows[limit - 1] : undefined;
      return { tasks, total, ...(last === undefined ? {} : { nextCursor: encodeCursor(last.createdAt, last.seq) }) };
    },
    counts() {
      const counts = Object.fromEntries(ALL_STATUSES.map((status) => [status, 0])) as Record<TaskStatus, number>;
      for (const row of selectCounts.all() as { status: TaskStatus; count: number }[]) counts[row.status] = Number(row.count);
      return counts;
    },
    unfinished() {
      return (selectUnfinished.all() as { record: string }[]).map((row) => JSON.parse(row.record) as TaskRecord);
    },
    evict(before, limit) {
      return (deleteFinished.all(before.toISOString(), limit) as { record: string }[]).map((row) => JSON.parse(row.record) as TaskRecord);
    },
  };
}

function parseRow(row: Record<string, unknown> | undefined): TaskRecord | undefined {
  return row === undefined ? undefined : (JSON.parse(row.record as string) as TaskRecord);
}

/** An ISO 8601 time as `toISOString` writes it (UTC), so that text order in SQLite is time order. */
function utc(time: string): string {
  const ms = Date.parse(time);
  return Number.isNaN(ms) ? time : new Date(ms).toISOString();
}

const utcOrNull = (time: string | undefined): string | null => (time === undefined ? null : utc(time));

/** A list cursor: the position of the last task of a page, opaque to callers. */
function encodeCursor(createdAt: string, seq: number): string {
  return Buffer.from(JSON.stringify([createdAt, seq])).toString('base64url');
}

function decodeCursor(cursor: string): [string, number] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString());
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && Number.isSafeInteger(value[1])) return [value[0], value[1] as number];
  } catch {
    // Not JSON: refused below like any other cursor this store did not write.
  }
  throw new KlymError('INVALID_ARGUMENT', '`cursor`: not a cursor this list gave; pass the `next_cursor` of the page before, or none');
}
