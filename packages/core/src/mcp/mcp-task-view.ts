import type { CallToolResult, Task } from '@modelcontextprotocol/server';
import type { TaskRecord } from '../tasks/store/task-types.ts';
import type { TaskStatusView } from '../tasks/views/task-views.ts';
import { replyToolHint } from './task-input.ts';

/** What an MCP task shows besides its record: how long it is kept and how often to poll it. */
export interface McpTaskTiming {
  /** Klym's `ttlMs`: how long a finished task stays readable, counted from its end. */
  readonly ttlMs: number;
  readonly pollIntervalMs: number;
  /** Whether the client takes form elicitations: an `input_required` task's message then is its question alone. @default false */
  readonly elicits?: boolean;
}

// The spec's statuses are fewer than Klym's: `pending` is `working` with a message saying it waits, an
// `error` is `failed`. A task waiting for its caller's reply is the spec's `input_required` in both eras (the
// 2025-11-25 tasks page, "Input Required Status"; the 2026-07-28 Tasks extension, "Task Status").
export const MCP_STATUS: Readonly<Record<TaskRecord['status'], Task['status']>> = {
  pending: 'working',
  running: 'working',
  input_required: 'input_required',
  completed: 'completed',
  error: 'failed',
  cancelled: 'cancelled',
};

/**
 * Why a task is where it is, in one line: queued, its current step, how it ended; for a task waiting for its
 * caller, the question (for an approval, the call in words), and, to a client that takes no elicitation
 * (`elicits` false), how to answer it with `reply_to_agent_task` instead.
 */
export function statusMessage(task: TaskRecord, elicits = false): string {
  switch (task.status) {
    case 'pending':
      return 'pending: queued until a slot to run it is free';
    case 'running':
      return task.currentStep;
    case 'input_required':
      if (task.input === undefined) return 'input_required';
      return elicits ? task.input.question : `${task.input.question} (${replyToolHint(task, task.input)})`;
    case 'completed':
      return `completed: ${task.result?.finishReason ?? 'stop'}`;
    case 'error':
      return task.error === undefined ? 'failed' : `${task.error.code}: ${task.error.message}`;
    case 'cancelled':
      return `cancelled: ${task.cancelReason ?? 'cancelled by caller'}`;
  }
}

/** A Klym task as an MCP task (`tasks/get`, `tasks/list`, `notifications/tasks/status`): the same id, its status mapped onto the spec's. */
export function toMcpTask(task: TaskRecord, timing: McpTaskTiming): Task {
  return {
    taskId: task.id,
    status: MCP_STATUS[task.status],
    statusMessage: statusMessage(task, timing.elicits),
    ttl: timing.ttlMs,
    createdAt: task.createdAt,
    lastUpdatedAt: task.finishedAt ?? task.startedAt ?? task.createdAt,
    pollInterval: timing.pollIntervalMs,
  };
}

/**
 * A finished task's `tasks/result`: the `CallToolResult` `run_agent_task` would have answered had it waited
 * — the final answer as text (for a failed or cancelled task, why, with `isError: true`) and the status
 * view `check_task_status` gives as `structuredContent`.
 */
export function toToolResult(task: TaskRecord, view: TaskStatusView): CallToolResult {
  const structuredContent = view as unknown as Record<string, unknown>;
  if (task.status === 'completed') return { content: [{ type: 'text', text: task.result?.finalText ?? '' }], structuredContent };
  const why = task.status === 'error' ? `Task ${task.id} failed: ${statusMessage(task)}` : `Task ${task.id} was ${statusMessage(task)}`;
  return { isError: true, content: [{ type: 'text', text: why }], structuredContent };
}
