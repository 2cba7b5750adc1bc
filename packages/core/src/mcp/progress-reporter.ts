import type { McpServer, ProgressToken } from '@modelcontextprotocol/server';
import { DEFAULT_MAX_STEPS, MCP_TASK_DEFAULTS } from '../defaults.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';

/** Sends one MCP session `notifications/progress` of the tasks started in it with a `progressToken`. */
export interface ProgressReporter {
  /** Reports `taskId`'s steps to the session under `token` until the task ends or the session closes. */
  watch(taskId: string, principal: string, token: ProgressToken): void;
  /** Stops every report. Idempotent. */
  close(): void;
}

/** Options of {@link createProgressReporter}. */
export interface ProgressReporterOptions {
  /** The least time between two notifications of one task, in milliseconds. @default MCP_TASK_DEFAULTS.progressIntervalMs (1_000) */
  readonly intervalMs?: number;
}

/** The `progressToken` of a request (its `_meta`, the spec's name), when it asked for progress. */
export const progressTokenOf = (extra: { readonly _meta?: { readonly progressToken?: ProgressToken } | undefined }): ProgressToken | undefined =>
  extra['_meta']?.progressToken;

/** The most log entries read per look: a step's tool calls are named from them. */
const LOG_PAGE = 500;

const tokens = new Intl.NumberFormat('en-US');

/** `step 3 of 25 done: grynya__query_graph ×2, grynya__get_node; 1,234 tokens so far`. */
function summary(task: TaskRecord, total: number, toolNames: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const name of toolNames) counts.set(name, (counts.get(name) ?? 0) + 1);
  const tools = counts.size === 0 ? 'no tool calls' : [...counts].map(([name, count]) => (count > 1 ? `${name} ×${count}` : name)).join(', ');
  return `step ${task.usage.steps} of ${total} done: ${tools}; ${tokens.format(task.usage.totalTokens)} tokens so far`;
}

/**
 * Progress of tasks as `notifications/progress` to `server`'s client: `progress` is the steps done, `total`
 * the step budget, `message` one line naming the tools the steps since the last notification called and
 * the tokens so far. A task is looked at in the task store at most once per `intervalMs` — so this works
 * the same on a front whose tasks run in other processes — and steps that ended in between are told as
 * one (the latest wins); the last steps are told once the task has ended. Nothing is sent while the
 * session is closed, and nothing after: the report of a task ends with it or with the session.
 */
export function createProgressReporter(server: McpServer, service: TaskService, options: ProgressReporterOptions = {}): ProgressReporter {
  const intervalMs = options.intervalMs ?? MCP_TASK_DEFAULTS.progressIntervalMs;
  const stops = new Map<string, () => void>();
  /** Wakes a task's report at once when it ends, unless it sent one less than `intervalMs` ago. */
  const hurries = new Map<string, () => void>();

  const unsubscribe = service.onEvent((event) => {
    if (event.type === 'task-end') hurries.get(event.task.id)?.();
  });

  const watch = (taskId: string, principal: string, token: ProgressToken): void => {
    if (stops.has(taskId)) return;
    const caller = { principal };
    let told = 0;
    let toldAt = Number.NEGATIVE_INFINITY;
    let logCursor = 0;
    let toolNames: string[] = [];
    let timer: NodeJS.Timeout | undefined;
    let looking = false;
    let stopped = false;

    const stop = (): void => {
      stopped = true;
      clearTimeout(timer);
      stops.delete(taskId);
      hurries.delete(taskId);
    };
    const schedule = (delayMs: number): void => {
      if (stopped) return;
      timer = setTimeout(() => void look(), delayMs);
      timer.unref();
    };
    const look = async (): Promise<void> => {
      if (stopped || looking) return;
      looking = true;
      clearTimeout(timer);
      let next = intervalMs;
      try {
        if (!server.isConnected()) return stop();
        const task = await service.tasks.get(taskId, caller);
        if (task.status !== 'pending') {
          const page = await service.tasks.logs(taskId, caller, { after: logCursor, limit: LOG_PAGE });
          logCursor = page.nextCursor;
          for (const entry of page.entries) if (entry.type === 'tool-call') toolNames.push(entry.data.toolName);
        }
        const wait = toldAt + intervalMs - performance.now();
        if (task.usage.steps > told && wait > 0) {
          // Too soon after the last one (a timer may fire a little early): the steps wait, the final ones too.
          next = wait;
        } else if (task.usage.steps > told) {
          const total = task.request.budget?.maxSteps ?? DEFAULT_MAX_STEPS;
          const params = { progressToken: token, progress: task.usage.steps, total, message: summary(task, total, toolNames) };
          told = task.usage.steps;
          toldAt = performance.now();
          toolNames = [];
          await server.server.notification({ method: 'notifications/progress', params });
        }
        if (isTerminal(task.status) && task.usage.steps <= told) stop();
      } catch {
        // The task was evicted, the store is away for a moment, or the client went: the next look decides.
        if (!server.isConnected()) stop();
      } finally {
        looking = false;
        schedule(next);
      }
    };

    stops.set(taskId, stop);
    hurries.set(taskId, () => {
      if (performance.now() - toldAt >= intervalMs) void look();
    });
    schedule(intervalMs);
  };

  return {
    watch,
    close() {
      unsubscribe();
      for (const stop of stops.values()) stop();
    },
  };
}
