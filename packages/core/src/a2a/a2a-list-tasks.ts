import type { ListTasksRequest, ListTasksResponse, Task } from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { isKlymError } from '../errors.ts';
import type { Caller } from '../tasks/task-manager-types.ts';
import type { TaskService } from '../tasks/task-service.ts';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import { klymStatusOf, toA2aTask } from './a2a-task.ts';

/** The most tasks one `ListTasks` reads from the store to fill a page filtered by time; past it, the page ends early with a token to go on. */
export const MAX_TASKS_SCANNED = 1_000;

/** A task's status timestamp as `toA2aTask` gives it: when it ended, else started, else was created. */
const statusTime = (task: TaskRecord): number => Date.parse(task.finishedAt ?? task.startedAt ?? task.createdAt);

/**
 * `ListTasks` over the caller's tasks, newest first:
 * - `status` filters as the store does (a state Klym never has matches nothing);
 * - `contextId`: a Klym task is its own context (its `contextId` is its id: tasks take no follow-up), so it
 *   selects that one task, when the caller can see it;
 * - `statusTimestampAfter` keeps tasks whose status timestamp is at or after it. The store cannot filter by
 *   it, so a page is filled by reading on (at most {@link MAX_TASKS_SCANNED} tasks; a page may then hold
 *   fewer than `pageSize`, with a token to go on), and `totalSize` counts the tasks before this filter (an
 *   upper bound) unless one page covered the whole list;
 * - `includeArtifacts` (default false) adds each task's artifacts: the `result` answer inline and the big
 *   tool results it kept, listed (one more read per task); without it, `artifacts` is empty.
 * @throws {RequestMalformedError} for a `pageSize` outside 1–200, or a `statusTimestampAfter` that is not a time
 */
export async function listA2aTasks(service: TaskService, caller: Caller, params: ListTasksRequest): Promise<ListTasksResponse> {
  const status = params.status === 0 ? undefined : klymStatusOf(params.status);
  const pageSize = params.pageSize ?? 50;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 200) throw new RequestMalformedError(`\`pageSize\`: expected 1 to 200, got ${pageSize}`);
  const after = params.statusTimestampAfter === undefined ? undefined : Date.parse(params.statusTimestampAfter);
  if (after !== undefined && Number.isNaN(after))
    throw new RequestMalformedError(`\`statusTimestampAfter\`: expected an ISO 8601 time, got ${JSON.stringify(params.statusTimestampAfter)}`);
  const none: ListTasksResponse = { tasks: [], nextPageToken: '', pageSize, totalSize: 0 };
  // A state Klym never has (rejected, auth-required) matches no task.
  if (params.status !== 0 && status === undefined) return none;
  const matches = (task: TaskRecord): boolean => (status === undefined || task.status === status) && (after === undefined || statusTime(task) >= after);

  // Each task's messages only when asked for (`historyLength`): a page of tasks is not a page of conversations.
  const history = params.historyLength === undefined ? undefined : { length: params.historyLength };
  const view = async (tasks: readonly TaskRecord[]): Promise<Task[]> => {
    if (params.includeArtifacts !== true) return tasks.map((task) => ({ ...toA2aTask(task, [], history), artifacts: [] }));
    return Promise.all(
      tasks.map(async (task) => {
        const { task: current, artifacts } = await service.tasks.read(task.id, caller, { tail: 0 });
        return toA2aTask(current, artifacts, history);
      }),
    );
  };

  if (params.contextId !== '') {
    const task = await service.tasks.get(params.contextId, caller).catch((error: unknown) => {
      if (isKlymError(error, 'TASK_NOT_FOUND')) return undefined;
      throw error;
    });
    return task === undefined || !matches(task) ? none : { ...none, tasks: await view([task]), totalSize: 1 };
  }

  const filter = status === undefined ? {} : { status };
  const found: TaskRecord[] = [];
  let cursor = params.pageToken === '' ? undefined : params.pageToken;
  let total = 0;
  let scanned = 0;
  for (;;) {
    // Asking for only what the page still lacks keeps the store's cursor at the last task looked at.
    const page = await service.tasks.list(caller, filter, { limit: pageSize - found.length, ...(cursor === undefined ? {} : { cursor }) });
    total = page.total;
    scanned += page.tasks.length;
    found.push(...page.tasks.filter(matches));
    cursor = page.nextCursor;
    // Without a time filter every task matches: one page is the answer.
    if (after === undefined || cursor === undefined || found.length >= pageSize || scanned >= MAX_TASKS_SCANNED) break;
  }
  const whole = after !== undefined && params.pageToken === '' && cursor === undefined;
  return { tasks: await view(found), nextPageToken: cursor ?? '', pageSize, totalSize: whole ? found.length : total };
}
