import type { TaskLogEntry, TaskLogPage } from './task-log.ts';
import type { TaskRecord } from './task-types.ts';

/** Options of {@link viewTask}. */
export interface TaskViewOptions {
  /** Give the whole result instead of a preview. @default false */
  readonly fullResult?: boolean;
  /** Characters of the result shown when not `fullResult`. @default 400 */
  readonly resultPreviewChars?: number;
  /** Give log entries whole (paging) instead of one-line summaries (the default glance). @default false */
  readonly fullEntries?: boolean;
}

/**
 * A task as an orchestrating LLM reads it: snake_case JSON, small by default. The log part holds the
 * page it is given (the last few entries for a glance), its cursor, and where entries were dropped.
 */
export function viewTask(task: TaskRecord, page: TaskLogPage | undefined, options: TaskViewOptions = {}): Record<string, unknown> {
  const preview = options.resultPreviewChars ?? 400;
  const result = task.result;
  const cut = result !== undefined && !options.fullResult && result.text.length > preview;
  return {
    task_id: task.id,
    status: task.status,
    step: task.currentStep,
    created_at: task.createdAt,
    ...(task.startedAt ? { started_at: task.startedAt } : {}),
    ...(task.finishedAt ? { finished_at: task.finishedAt } : {}),
    usage: {
      steps: task.usage.steps,
      tokens: task.usage.totalTokens,
      ...(task.usage.costUsd === undefined ? {} : { cost_usd: Number(task.usage.costUsd.toFixed(6)) }),
    },
    ...(result === undefined
      ? {}
      : {
          finish_reason: result.finishReason,
          model: result.model,
          result: cut ? `${result.text.slice(0, preview)}…` : result.text,
          ...(cut ? { result_truncated: true, result_chars: result.text.length } : {}),
        }),
    ...(task.error ? { error: { code: task.error.code, message: task.error.message.slice(0, 400) } } : {}),
    ...(task.cancelReason ? { cancel_reason: task.cancelReason } : {}),
    ...(task.writeBack
      ? { write_back: { status: task.writeBack.status, node_id: task.writeBack.nodeId, ...(task.writeBack.error ? { error: task.writeBack.error.slice(0, 300) } : {}) } }
      : {}),
    ...(page === undefined ? {} : { log: viewLogPage(page, options.fullEntries ?? false) }),
  };
}

/** A log page as snake_case JSON: entries whole, or as one-line summaries. */
export function viewLogPage(page: TaskLogPage, fullEntries: boolean): Record<string, unknown> {
  return {
    entries: page.entries.map((entry) => (fullEntries ? { seq: entry.seq, time: entry.time, type: entry.type, ...entry.data } : summarize(entry))),
    next_cursor: page.nextCursor,
    last_seq: page.lastSeq,
    ...(page.more ? { more: true } : {}),
    ...(page.dropped > 0 ? { dropped: page.dropped } : {}),
    ...(page.droppedBefore ? { dropped_before: { from_seq: page.droppedBefore.fromSeq, to_seq: page.droppedBefore.toSeq } } : {}),
  };
}

/** A log entry in one line of at most ~110 characters. */
function summarize(entry: TaskLogEntry): { seq: number; type: string; text: string } {
  const data = entry.data as Record<string, unknown>;
  const text =
    entry.type === 'tool-call'
      ? `${String(data.toolName)} ${JSON.stringify(data.args)}`
      : entry.type === 'tool-result'
        ? `${String(data.toolName)} ${String(data.durationMs)}ms ${String(data.preview ?? '')}`
        : entry.type === 'upstream-log'
          ? `[${String(data.upstream)} ${String(data.level)}] ${String(data.message)}`
          : entry.type === 'llm-response'
            ? `${String(data.finishReason)}: ${String(data.text ?? '')}`
            : JSON.stringify(data);
  const line = text.replace(/\s+/g, ' ');
  return { seq: entry.seq, type: entry.type, text: line.length > 100 ? `${line.slice(0, 100)}…` : line };
}
