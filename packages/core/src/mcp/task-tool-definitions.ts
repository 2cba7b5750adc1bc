import type { z } from 'zod';
import { isKlymError } from '../errors.ts';
import {
  cancelTaskSchema,
  replyTaskSchema,
  checkTaskSchema,
  listTasksSchema,
  noArgumentsSchema,
  queryArtifactsSchema,
  readArtifactSchema,
  startTaskSchema,
} from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { startOptionsOf } from './start-options.ts';

/** A tool result as both SDK lines accept it: JSON as text and as `structuredContent`, or an `isError` result. */
export interface TaskToolResult {
  [key: string]: unknown;
  content: { type: 'text'; text: string }[];
  structuredContent: Record<string, unknown>;
  isError?: true;
}

/**
 * One of Klym's task tools as data, so that the 1.x SDK's session servers and the v2 SDK's 2026-07-28
 * servers register the same tools with the same words: its name, what `tools/list` says of it, and what a
 * call does for `principal` (the request's `_meta` carries the caller's trace context).
 */
export interface TaskToolDefinition<Schema extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly config: {
    readonly title: string;
    readonly description: string;
    readonly inputSchema: Schema;
    readonly annotations: {
      readonly readOnlyHint: boolean;
      readonly destructiveHint?: boolean;
      readonly idempotentHint?: boolean;
      readonly openWorldHint: boolean;
    };
  };
  readonly run: (service: TaskService, args: z.output<Schema>, principal: string, meta: unknown, signal?: AbortSignal) => Promise<object>;
}

const define = <Schema extends z.ZodType>(definition: TaskToolDefinition<Schema>): TaskToolDefinition => definition as unknown as TaskToolDefinition;

/** Why arguments were refused, as the v2 SDK words it for every other tool: `budget: Unrecognized key: "max_step"`. */
export function argumentFaults(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length > 0 ? `${issue.path.join('.')}: ` : ''}${issue.message}`).join('; ');
}

/** A view as a tool result: its JSON as text and as `structuredContent`; a failure as an `isError` result with its code. */
export async function answer(produce: () => Promise<object>): Promise<TaskToolResult> {
  try {
    const result = (await produce()) as Record<string, unknown>;
    return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
  } catch (error) {
    const failure = isKlymError(error)
      ? { code: error.code, message: error.message }
      : { code: 'INTERNAL', message: `Klym failed: ${error instanceof Error ? error.message : String(error)}` };
    return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: failure }) }], structuredContent: { error: failure } };
  }
}

/** The eight task tools, in the order `tools/list` gives them. */
export const TASK_TOOLS: readonly TaskToolDefinition[] = [
  define({
    name: 'start_async_agent_task',
    config: {
      title: 'Start a background task',
      description:
        'Hands a piece of heavy work (research in the graph, analysis, many tool calls) to Klym, which runs it in the ' +
        'background with its own LLM and tools. Answers at once with {task_id, status}; the work goes on after. ' +
        'Write `prompt` as a complete brief: Klym sees nothing else of your conversation. Poll with check_task_status. ' +
        'Optional: `model` (a name from describe_capabilities), `tools` (narrow the allowed tools), `budget` (capped by ' +
        "the server's maximums), `record_result: true` to save the result in the graph as an Analysis node linked to today, " +
        '`idempotency_key` to retry safely: a start with a key you used before answers that task instead of starting another.',
      inputSchema: startTaskSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    run: (service, args, principal, meta) => service.start(args, principal, startOptionsOf(meta)),
  }),
  define({
    name: 'check_task_status',
    config: {
      title: 'Check a background task',
      description:
        'Where a task is: status (pending, running, input_required, completed, error, cancelled; a pending one says its queue_position, how ' +
        'many waiting tasks start before it; an input_required one says the `question` it asks you (or the call it waits for you to approve): reply with reply_to_agent_task; ' +
        'current step, budget use beside its ' +
        'limits, elapsed time, the last few log lines with a `next_cursor`, and the final answer when done (cut at 400 ' +
        'characters with result_truncated: true). Small by default so your context stays clean; pass `full_result: true` ' +
        'for the whole answer and every step’s text, or `log_after: <cursor>` to page through the full log.',
      inputSchema: checkTaskSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    run: (service, args, principal) => service.status(args, principal),
  }),
  define({
    name: 'read_task_artifact',
    config: {
      title: "Read a background task's artifact",
      description:
        'Lines of an artifact of your task: a tool result too big for any context that the task kept whole (check_task_status ' +
        'lists them as `artifacts`). From line `offset` (0-based, default 0), `limit` lines (default 100, at most 500); a page also stops ' +
        'when it is full, and a long line comes in parts: the reply has `next_offset` (and `next_char_offset` inside a long line) when more ' +
        'follows. A JSON result is kept as records, one per line; `original: true` reads the JSON as the tool gave it, by characters.',
      inputSchema: readArtifactSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    run: (service, args, principal) => service.readArtifact(args, principal),
  }),
  define({
    name: 'query_task_artifact',
    config: {
      title: "Query a background task's artifacts with SQL",
      description:
        "Answers a question about what your task kept, exactly and at no model cost: one SQL query (DuckDB) over the task's artifacts, " +
        'each a table named by its id (check_task_status lists them): a text artifact has columns `n` (line number) and `line`; a JSON ' +
        'result kept as records has `n` and one column per key, nested objects as STRUCTs (`e.service`). The rows come back as CSV with a ' +
        'header line; a long answer says how many rows it left out (aggregate, or page with LIMIT/OFFSET). Works on finished tasks too.',
      inputSchema: queryArtifactsSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    run: (service, args, principal, _meta, signal) => service.queryArtifacts(args, principal, signal === undefined ? {} : { signal }),
  }),
  define({
    name: 'reply_to_agent_task',
    config: {
      title: 'Answer a background task’s question, or approve its call',
      description:
        'Answers the question your task asked (check_task_status shows status input_required and its `question`) with `answer`, ' +
        'or, when it waits for approval of a call (`input.kind: approval`), decides with `approve` (and a `reason` its model reads). ' +
        'The task goes on from where it waited. Only the first reply counts; a task not waiting refuses it, naming its status.',
      inputSchema: replyTaskSchema,
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    run: (service, args, principal) => service.reply(args, principal),
  }),
  define({
    name: 'cancel_agent_task',
    config: {
      title: 'Cancel a background task',
      description:
        'Stops a pending or running task (its tool calls in flight are cancelled upstream). A task that already ended stays as it was; the reply says so.',
      inputSchema: cancelTaskSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    run: (service, args, principal) => service.cancel(args, principal),
  }),
  define({
    name: 'list_agent_tasks',
    config: {
      title: 'List your background tasks',
      description:
        'Your tasks, newest first, with status and step, a page at a time (50 unless `limit`); filter with `status`. ' +
        'When there are older ones the reply has a `next_cursor`: pass it as `cursor` for the next page.',
      inputSchema: listTasksSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    run: (service, args, principal) => service.list(args, principal),
  }),
  define({
    name: 'describe_capabilities',
    config: {
      title: "What Klym's tasks may use",
      description:
        'The upstream servers and their state, the namespaced tool names a task may call (for `tools.allow`), the ' +
        'models (for `model`), the tool policies (for `tools.policy`), the default and maximum budgets, and your quota: how many ' +
        'of your tasks may run and wait at once, and how many run and wait now.',
      inputSchema: noArgumentsSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    run: (service, _args, principal) => service.capabilities(principal),
  }),
];

/** What `run_agent_task` says of itself besides the era's own words: it takes `start_async_agent_task`'s arguments. */
export const AGENT_TASK_TOOL = {
  name: 'run_agent_task',
  title: 'Run a background task (MCP task)',
  inputSchema: startTaskSchema,
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
} as const;
