import { z } from 'zod';
import type { AgentBudget } from '../agent/types.ts';
import { sqlArgument } from '../artifacts/sql-argument.ts';
import { KlymError } from '../errors.ts';
import type { PoolTool } from '../pool/session-pool.ts';
import { READ_ONLY_POLICY, toolAccess, type AccessRules, type ToolSelection } from '../tools/tool-policy.ts';
import { TASK_STATUSES, type RequestLimits, type TaskRequest } from './store/task-types.ts';

const STATUSES = TASK_STATUSES;
const taskId = z.string().min(1).max(200);

/** Arguments of `start_async_agent_task` (also the body of `POST /api/tasks`), as a zod shape (what `McpServer.registerTool` takes). */
const startTaskShape = {
  prompt: z.string().min(1).max(200_000).describe('What Klym should do, in full: it sees nothing of your conversation but this.'),
  system_prompt: z.string().max(50_000).optional().describe('Replaces the default system prompt; `{{tools}}` in it lists the tools.'),
  model: z.string().max(200).optional().describe('One of the model names describe_capabilities lists. Default: the first of them.'),
  tools: z
    .strictObject({
      allow: z.array(z.string().max(200)).max(200).optional().describe('Only these namespaced tools (`*` is a wildcard).'),
      deny: z.array(z.string().max(200)).max(200).optional().describe('Never these tools.'),
      policy: z.string().max(100).optional().describe('A policy name from describe_capabilities, e.g. `read-only`.'),
      approval: z
        .array(z.string().max(200))
        .max(200)
        .optional()
        .describe('Tools whose every call waits for your approval (reply_to_agent_task with approve); added to the server’s own.'),
    })
    .optional()
    .describe('Narrows the tools the task may call; it can never widen what the server allows.'),
  budget: z
    .strictObject({
      max_steps: z.number().int().positive().optional(),
      max_tokens: z.number().int().positive().optional(),
      max_cost_usd: z.number().positive().optional(),
      timeout_ms: z.number().int().positive().optional(),
    })
    .optional()
    .describe("Limits of the run; capped by the server's maximums (describe_capabilities shows them)."),
  record_result: z.boolean().optional().describe('Write the result into the graph as an Analysis node `klym_<task_id>` linked to today.'),
  idempotency_key: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe(
      'Your key for this start: starting again with the same key answers the task it started (whatever its status) instead of a new one. Use it to retry safely.',
    ),
  ask_caller: z
    .boolean()
    .optional()
    .describe(
      'Let the task ask you a question when it cannot go on without one (default true): it then waits as `input_required` until you answer with reply_to_agent_task. `false`: it never asks.',
    ),
  webhook: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .describe(
      "The name of one of the server's configured webhook endpoints, to be told when this task starts or ends (the endpoint's configuration says which). A name only: never a URL.",
    ),
};

/** Arguments of `check_task_status` (also `GET /api/tasks/:id`). */
const checkTaskShape = {
  task_id: taskId.describe('The id start_async_agent_task returned.'),
  log_after: z.number().int().min(0).optional().describe('Give log entries after this cursor (a `next_cursor` from an earlier reply), in full.'),
  max_log_entries: z.number().int().min(1).max(200).optional().describe('How many log entries to give: default 3 (a glance), or 20 with `log_after`.'),
  full_result: z.boolean().optional().describe('Give the whole final answer (and every step’s text as `transcript`) instead of its first 400 characters.'),
};

/** Arguments of a log page (`GET /api/tasks/:id/logs`). */
const taskLogsShape = {
  task_id: taskId.describe('The id start_async_agent_task returned.'),
  after: z.number().int().min(0).optional().describe('Entries after this cursor. Default 0: from the oldest kept.'),
  limit: z.number().int().positive().optional().describe('Entries at most (up to 500). Default 100.'),
};

/** Arguments of `read_task_artifact` (also `GET /api/tasks/:id/artifacts/:artifact`). */
const readArtifactShape = {
  task_id: taskId.describe('The id start_async_agent_task returned.'),
  artifact: z.string().min(1).max(100).describe('An artifact id (`art_…`) that check_task_status lists.'),
  offset: z.number().int().min(0).optional().describe('The first line to give, 0-based. Default 0. With `original`, the first character.'),
  char_offset: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Where to start inside line `offset`, in characters, to read on in a long line (`next_char_offset`). Default 0.'),
  limit: z
    .number()
    .int()
    .min(1)
    .max(500)
    .optional()
    .describe('Lines to give, at most 500. Default 100. A page also stops when it is full: `next_offset` says where to read on.'),
  original: z
    .boolean()
    .optional()
    .describe(
      'Read the result as the tool gave it (a JSON answer kept as records: its original text, byte for byte), by characters from `offset`, instead of by lines.',
    ),
};

/** Arguments of `query_task_artifact` (also the body of `POST /api/tasks/:id/query`). */
const queryArtifactsShape = {
  task_id: taskId.describe('The id start_async_agent_task returned.'),
  sql: sqlArgument(
    "One SQL query (DuckDB) over the task's artifacts, each a table named by its id (`SELECT … FROM art_… …`): text artifacts have columns n, line; JSON records one column per key.",
  ),
};

/** Arguments of `reply_to_agent_task` (also the body of `POST /api/tasks/:id/reply`, with the id in the path). */
const replyTaskShape = {
  task_id: taskId.describe('The id of the task that asked (check_task_status shows status input_required and its question).'),
  answer: z.string().min(1).max(100_000).optional().describe('Your answer to its question: the task’s model reads it as the question’s result, whole.'),
  approve: z.boolean().optional().describe('Your decision on the call it waits to make (an approval): true runs it, false denies it.'),
  reason: z.string().max(10_000).optional().describe('Why, with a decision: a denied task’s model reads it.'),
};

/** Arguments of `cancel_agent_task`. */
const cancelTaskShape = { task_id: taskId.describe('The id of the task to cancel.') };

/** Arguments of `list_agent_tasks` (also `GET /api/tasks`). */
const listTasksShape = {
  status: z.enum(STATUSES).optional().describe('Only tasks in this status.'),
  cursor: z.string().min(1).max(500).optional().describe('The `next_cursor` of the page before, for older tasks.'),
  limit: z.number().int().min(1).max(200).optional().describe('Tasks per page (at most 200). Default 50.'),
};

// The schemas every way in parses with, once: the MCP SDK is given them as the tools' input schemas (its parse
// is the only one there), REST parses its bodies and queries with them. Strict, so a misspelled argument
// (`idempotencyKey`) is refused by name instead of dropped. Built once: a schema per call would cost a
// compile of the shape on every request.
/** Arguments of `start_async_agent_task` and `run_agent_task` (and the body of `POST /api/tasks`). */
export const startTaskSchema = z.strictObject(startTaskShape);
/** Arguments of `check_task_status` (and `GET /api/tasks/:id`). */
export const checkTaskSchema = z.strictObject(checkTaskShape);
/** Arguments of a log page (`GET /api/tasks/:id/logs`). */
export const taskLogsSchema = z.strictObject(taskLogsShape);
/** Arguments of `reply_to_agent_task` (and `POST /api/tasks/:id/reply`). */
export const replyTaskSchema = z.strictObject(replyTaskShape);
/** Arguments of `cancel_agent_task` (and `POST /api/tasks/:id/cancel`). */
export const cancelTaskSchema = z.strictObject(cancelTaskShape);
/** Arguments of `list_agent_tasks` (and `GET /api/tasks`). */
export const listTasksSchema = z.strictObject(listTasksShape);
/** Arguments of `read_task_artifact` (and `GET /api/tasks/:id/artifacts/:artifact`). */
export const readArtifactSchema = z.strictObject(readArtifactShape);
/** Arguments of `query_task_artifact` (and `POST /api/tasks/:id/query`). */
export const queryArtifactsSchema = z.strictObject(queryArtifactsShape);
/** Arguments of `describe_capabilities`: none. */
export const noArgumentsSchema = z.strictObject({});

/** Parsed arguments of `start_async_agent_task`. */
export type StartTaskArgs = z.output<typeof startTaskSchema>;
/** Parsed arguments of `check_task_status`. */
export type CheckTaskArgs = z.output<typeof checkTaskSchema>;
/** Parsed arguments of a log page. */
export type TaskLogsArgs = z.output<typeof taskLogsSchema>;
/** Parsed arguments of `reply_to_agent_task`. */
export type ReplyTaskArgs = z.output<typeof replyTaskSchema>;
/** Parsed arguments of `cancel_agent_task`. */
export type CancelTaskArgs = z.output<typeof cancelTaskSchema>;
/** Parsed arguments of `list_agent_tasks`. */
export type ListTasksArgs = z.output<typeof listTasksSchema>;
/** Parsed arguments of `query_task_artifact`. */
export type QueryArtifactsArgs = z.output<typeof queryArtifactsSchema>;
/** Parsed arguments of `read_task_artifact`. */
export type ReadArtifactArgs = z.output<typeof readArtifactSchema>;

/**
 * Parses wire input against one of the schemas above (what an edge that is not the MCP SDK, such as REST, calls).
 * @throws {KlymError} `INVALID_ARGUMENT` naming the first bad field (`` `budget.max_steps`: … ``).
 */
export function parseArgs<Schema extends z.ZodType>(schema: Schema, input: unknown): z.output<Schema> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.length ? issue.path.join('.') : issue?.code === 'unrecognized_keys' ? issue.keys.join(', ') : 'arguments';
  throw new KlymError('INVALID_ARGUMENT', `\`${field}\`: ${issue?.message ?? 'invalid'}`);
}

const BUDGET_KEYS = [
  ['max_steps', 'maxSteps'],
  ['max_tokens', 'maxTokens'],
  ['max_cost_usd', 'maxCostUsd'],
  ['timeout_ms', 'timeoutMs'],
] as const;

/**
 * Turns a caller's arguments into a task request that stays inside what the server allows: `model` must
 * be a configured name, and so must `webhook` (an endpoint's name, never a URL); each `budget` field is
 * capped by the server's maximum, and `tools` can only narrow the server's selection. `listTools` gives
 * the pool's real tools, over which two allow lists are intersected (by {@link toolAccess}, the rule the
 * runs apply).
 * @throws {KlymError} `INVALID_ARGUMENT` naming the field and what it may be.
 */
export async function narrowTaskRequest(args: StartTaskArgs, limits: RequestLimits, listTools: () => Promise<readonly PoolTool[]>): Promise<TaskRequest> {
  if (args.model !== undefined && !limits.models.includes(args.model)) {
    throw new KlymError('INVALID_ARGUMENT', `\`model\`: "${args.model.slice(0, 80)}" is not offered here; choose one of: ${limits.models.join(', ')}`);
  }
  if (args.webhook !== undefined && !(limits.webhooks ?? []).includes(args.webhook)) {
    const known = limits.webhooks === undefined || limits.webhooks.length === 0 ? 'none is configured here' : `choose one of: ${limits.webhooks.join(', ')}`;
    throw new KlymError('INVALID_ARGUMENT', `\`webhook\`: "${args.webhook.slice(0, 80)}" is not a webhook endpoint here; ${known}`);
  }
  const budget: { -readonly [Key in keyof AgentBudget]: number } = {};
  for (const [wire, key] of BUDGET_KEYS) {
    const asked = args.budget?.[wire] ?? limits.defaultBudget[key];
    const max = limits.maxBudget[key];
    const value = asked === undefined ? max : max === undefined ? asked : Math.min(asked, max);
    if (value !== undefined) budget[key] = value;
  }
  const systemPrompt = args.system_prompt ?? limits.systemPrompt;
  return {
    prompt: args.prompt,
    model: args.model ?? (limits.models[0] as string),
    budget,
    tools: await narrowTools(args.tools, limits, listTools),
    ...(systemPrompt === undefined ? {} : { systemPrompt }),
    ...(args.record_result === undefined ? {} : { recordResult: args.record_result }),
    ...(args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key }),
    ...(args.webhook === undefined ? {} : { webhook: args.webhook }),
    ...(args.ask_caller === false ? { askCaller: false } : {}),
  };
}

async function narrowTools(asked: ToolSelection | undefined, limits: RequestLimits, listTools: () => Promise<readonly PoolTool[]>): Promise<ToolSelection> {
  const server = limits.selection ?? {};
  if (asked?.policy !== undefined) {
    const known = [READ_ONLY_POLICY, ...Object.keys(limits.policies ?? {})];
    if (!known.includes(asked.policy))
      throw new KlymError('INVALID_ARGUMENT', `\`tools.policy\`: "${asked.policy.slice(0, 80)}" is not a policy here; choose one of: ${known.join(', ')}`);
    if (server.policy !== undefined && server.policy !== asked.policy) {
      throw new KlymError('INVALID_ARGUMENT', `\`tools.policy\`: tasks here always run under the policy "${server.policy}"`);
    }
  }
  const policy = server.policy ?? asked?.policy;
  const deny = [...(server.deny ?? []), ...(asked?.deny ?? [])];
  let allow = server.allow ?? asked?.allow;
  if (server.allow !== undefined && asked?.allow !== undefined) {
    // Two lists of patterns have no pattern for their intersection: it is taken over the tools there are,
    // each decided as a run would decide it (upstream rules, the server's selection, read-only tools).
    const callerRules: AccessRules = { ...limits, selection: { allow: asked.allow } };
    allow = (await listTools()).filter((tool) => toolAccess(tool, limits).allowed && toolAccess(tool, callerRules).allowed).map((tool) => tool.name);
    if (allow.length === 0) {
      throw new KlymError('INVALID_ARGUMENT', '`tools.allow`: matches none of the tools tasks here may use; describe_capabilities lists them');
    }
  }
  // The caller's approvals add to the server's: a call either asks for waits.
  const approval = [...new Set([...(server.approval ?? []), ...(asked?.approval ?? [])])];
  return {
    ...(allow === undefined ? {} : { allow }),
    ...(deny.length > 0 ? { deny } : {}),
    ...(policy === undefined ? {} : { policy }),
    ...(approval.length > 0 ? { approval } : {}),
  };
}
