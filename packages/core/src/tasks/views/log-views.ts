import { clipText } from '../../internal/clip-text.ts';
import type { TaskLogEntry } from '../store/log-entry.ts';
import type { TaskLogPage } from '../store/task-log.ts';

// Every view is snake_case JSON for an orchestrating LLM: what it reads, in the words of the tools' arguments.

/** A log entry in one line, for a glance. */
export interface TaskLogLineView {
  readonly seq: number;
  readonly type: string;
  readonly text: string;
}

/** A log entry whole, for paging: its `seq`, `time`, `type`, and the event's own fields. */
export interface TaskLogEntryView {
  readonly seq: number;
  readonly time: string;
  readonly type: string;
  /** The event's fields (`toolName`, `args`, `message`, …), which differ by `type`. */
  readonly [field: string]: unknown;
}

/** A page of a task's log. */
export interface TaskLogView<Entry extends TaskLogLineView | TaskLogEntryView = TaskLogLineView | TaskLogEntryView> {
  readonly entries: readonly Entry[];
  /** Pass as `log_after` (or `after`) to read on. */
  readonly next_cursor: number;
  /** The `seq` of the newest entry so far. */
  readonly last_seq: number;
  /** Newer entries remain after this page. */
  readonly more?: true;
  /** Entries dropped over the task's life to keep its log bounded. */
  readonly dropped?: number;
  /** This page starts after a gap of dropped entries. */
  readonly dropped_before?: { readonly from_seq: number; readonly to_seq: number };
}

/** A log page of `GET /api/tasks/:id/logs`. */
export interface TaskLogPageView extends TaskLogView<TaskLogEntryView> {
  readonly task_id: string;
}

const LOG_LINE_CHARS = 100;

/** A log page: entries whole, or as one-line summaries. */
export function viewLogPage(page: TaskLogPage, fullEntries: true): TaskLogView<TaskLogEntryView>;
export function viewLogPage(page: TaskLogPage, fullEntries: false): TaskLogView<TaskLogLineView>;
export function viewLogPage(page: TaskLogPage, fullEntries: boolean): TaskLogView;
export function viewLogPage(page: TaskLogPage, fullEntries: boolean): TaskLogView {
  return {
    entries: page.entries.map((entry) => (fullEntries ? { ...entry.data, seq: entry.seq, time: entry.time, type: entry.type } : summarize(entry))),
    next_cursor: page.nextCursor,
    last_seq: page.lastSeq,
    ...(page.more ? { more: true as const } : {}),
    ...(page.dropped > 0 ? { dropped: page.dropped } : {}),
    ...(page.droppedBefore ? { dropped_before: { from_seq: page.droppedBefore.fromSeq, to_seq: page.droppedBefore.toSeq } } : {}),
  };
}

/** A log entry in one line of at most ~100 characters of JSON. */
function summarize(entry: TaskLogEntry): TaskLogLineView {
  return { seq: entry.seq, type: clipText(entry.type, 40), text: clipText(summaryText(entry).replace(/\s+/g, ' '), LOG_LINE_CHARS) };
}

function summaryText(entry: TaskLogEntry): string {
  switch (entry.type) {
    case 'tool-call':
      return `${entry.data.toolName} ${JSON.stringify(entry.data.args)}`;
    case 'tool-result':
      return `${entry.data.toolName} ${entry.data.durationMs}ms ${entry.data.preview}`;
    case 'upstream-log':
      return `[${entry.data.upstream} ${entry.data.level}] ${entry.data.message}`;
    case 'llm-response':
      return `${entry.data.finishReason}: ${entry.data.text}`;
    case 'artifact-kept': {
      const { id, tool, bytes, lines } = entry.data.artifact;
      return `${tool} kept as ${id}: ${bytes} bytes, ${lines} lines`;
    }
    case 'artifact-query':
      return `${entry.data.sql} → ${entry.data.rows} rows in ${entry.data.elapsedMs}ms${entry.data.kept === undefined ? '' : ` (kept as ${entry.data.kept})`}`;
    default:
      return JSON.stringify(entry.data);
  }
}
