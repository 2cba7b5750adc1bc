import { KlymError, TERMINAL_STATUSES, type Caller, type TaskListPage, type TaskLogPage, type TaskService, type TaskStatus, type TaskStore } from '@klym/core';
import type { DashboardViewer } from './dashboard-auth.ts';
import { STATUSES, type TaskListQuery } from './views/task-list.ts';

/** Tasks a page shows at once. */
const PAGE_SIZE = 25;
/** Entries read from the store at a time (the most the task manager serves in one page). */
const LOG_PAGE = 500;

/** The tasks a dashboard viewer may see: their own, or every principal's for an admin. */
export interface DashboardTasks {
  /** A page of the list, newest first. @throws {KlymError} `INVALID_ARGUMENT` for a cursor the list never gave */
  list(viewer: DashboardViewer, query: TaskListQuery): Promise<TaskListPage>;
  /**
   * Whom to read or cancel the task as: the viewer, or for an admin the task's own principal. Reading as
   * the viewer a task that is not theirs fails with `TASK_NOT_FOUND`, exactly as for an id that never existed.
   */
  callerFor(viewer: DashboardViewer, id: string): Promise<Caller>;
  /** The task's whole log as one page (a bounded log: at most `taskLog.maxBytes` of entries). */
  wholeLog(id: string, caller: Caller): Promise<TaskLogPage>;
}

/** The status filter of a query string, checked. @throws {KlymError} `INVALID_ARGUMENT` naming the statuses there are */
export function parseStatus(value: string | undefined): TaskStatus | undefined {
  if (value === undefined || value === '') return undefined;
  if ((STATUSES as readonly string[]).includes(value)) return value as TaskStatus;
  throw new KlymError('INVALID_ARGUMENT', `\`status\`: expected one of ${STATUSES.join(', ')}, got "${value.slice(0, 40)}"`);
}

/**
 * Reads through the task service's manager, whose rule is that a principal sees its own tasks. An admin's
 * list and look-ups go to the store, which knows every principal's; what it then reads or cancels goes
 * through the manager as the task's principal, so every other rule (redaction, cancel semantics) holds.
 */
export function createDashboardTasks(service: TaskService, store: TaskStore): DashboardTasks {
  const tasks = service.tasks;
  return {
    list(viewer, query) {
      const page = { limit: PAGE_SIZE, ...(query.cursor === undefined ? {} : { cursor: query.cursor }) };
      const filter = query.status === undefined ? {} : { status: query.status };
      return viewer.admin ? store.list(filter, page) : tasks.list({ principal: viewer.principal }, filter, page);
    },
    async callerFor(viewer, id) {
      const task = viewer.admin ? await store.get(id) : undefined;
      // An id the store does not know is read as the viewer: the manager's refusal is the one anyone gets.
      return { principal: task?.principal ?? viewer.principal };
    },
    async wholeLog(id, caller) {
      const entries: TaskLogPage['entries'][number][] = [];
      let page = await tasks.logs(id, caller, { after: 0, limit: LOG_PAGE });
      entries.push(...page.entries);
      while (page.more && page.entries.length > 0) {
        page = await tasks.logs(id, caller, { after: page.nextCursor, limit: LOG_PAGE });
        entries.push(...page.entries);
      }
      return { entries, nextCursor: page.nextCursor, lastSeq: page.lastSeq, dropped: page.dropped, more: false };
    },
  };
}

/** Whether the page of a task in `status` (with its write-back's) may still change. */
export const mayChange = (status: TaskStatus, writeBack: string | undefined): boolean => !TERMINAL_STATUSES.includes(status) || writeBack === 'pending';
