import { KlymError, matchesPattern, type AgentBudget, type TaskRequest, type TaskStatus } from '@klym/core';
import { z } from 'zod';
import type { ResolvedServerOptions } from './server-options.ts';

type ToolSelection = NonNullable<TaskRequest['tools']>;

const STATUSES = ['pending', 'running', 'completed', 'error', 'cancelled'] as const satisfies readonly TaskStatus[];

/** Arguments of `start_async_agent_task` (also the body of `POST /api/tasks`). */
export const startTaskShape = {
  prompt: z.string().min(1).max(200_000).describe('What Klym should do, in full: it sees nothing of your conversation but this.'),
  system_prompt: z.string().max(50_000).optional().describe('Replaces the default system prompt; `{{tools}}` in it lists the tools.'),
  model: z.string().max(200).optional().describe('One of the model names describe_capabilities lists. Default: the first of them.'),
  tools: z
    .object({
      allow: z.array(z.string().max(200)).max(200).optional().describe('Only these namespaced tools (`*` is a wildcard).'),
      deny: z.array(z.string().max(200)).max(200).optional().describe('Never these tools.'),
      policy: z.string().max(100).optional().describe('A policy name from describe_capabilities, e.g. `read-only`.'),
    })
    .strict()
    .optional()
    .describe('Narrows the tools the task may call; it can never widen what the server allows.'),
  budget: z
    .object({
      max_steps: z.number().int().positive().optional(),
      max_tokens: z.number().int().positive().optional(),
      max_cost_usd: z.number().positive().optional(),
      timeout_ms: z.number().int().positive().optional(),
    })
    .strict()
    .optional()
    .describe("Limits of the run; capped by the server's maximums (describe_capabilities shows them)."),
  record_result: z.boolean().optional().describe('Write the result into the graph as an Analysis node `klym_<task_id>` linked to today.'),
};

/** Arguments of `check_task_status`. */
export const checkTaskShape = {
  task_id: z.string().min(1).max(200).describe('The id start_async_agent_task returned.'),
  log_after: z.number().int().min(0).optional().describe('Give log entries after this cursor (a `next_cursor` from an earlier reply), in full.'),
  max_log_entries: z.number().int().min(1).max(200).optional().describe('How many log entries to give: default 3 (a glance), or 20 with `log_after`.'),
  full_result: z.boolean().optional().describe('Give the whole result instead of its first 400 characters.'),
};

/** Arguments of `cancel_agent_task`. */
export const cancelTaskShape = { task_id: z.string().min(1).max(200).describe('The id of the task to cancel.') };

/** Arguments of `list_agent_tasks`. */
export const listTasksShape = { status: z.enum(STATUSES).optional().describe('Only tasks in this status.') };

/** Parsed arguments of `start_async_agent_task`. */
export type StartTaskArgs = z.infer<z.ZodObject<typeof startTaskShape>>;

/** Parses `input` against `shape`, or throws `INVALID_ARGUMENT` naming the first bad field. */
export function parseArgs<Shape extends z.ZodRawShape>(shape: Shape, input: unknown): z.infer<z.ZodObject<Shape>> {
  const parsed = z.object(shape).strict().safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.length ? issue.path.join('.') : issue?.code === 'unrecognized_keys' ? (issue.keys ?? []).join(', ') : 'arguments';
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
 * be a configured name, `budget` is capped by the server's maximums, `tools` can only narrow the
 * server's selection. `toolNames` lists the pool's namespaced tools (to intersect two allow lists).
 * @throws {KlymError} `INVALID_ARGUMENT` naming the field.
 */
export async function toTaskRequest(args: StartTaskArgs, options: ResolvedServerOptions, toolNames: () => Promise<readonly string[]>): Promise<TaskRequest> {
  if (args.model !== undefined && !options.models.includes(args.model)) {
    throw new KlymError('INVALID_ARGUMENT', `\`model\`: "${args.model.slice(0, 80)}" is not offered here; choose one of: ${options.models.join(', ')}`);
  }
  const budget: Record<string, number> = {};
  for (const [wire, key] of BUDGET_KEYS) {
    const asked = args.budget?.[wire] ?? options.defaultBudget[key];
    const max = options.maxBudget[key];
    const value = asked === undefined ? max : max === undefined ? asked : Math.min(asked, max);
    if (value !== undefined) budget[key] = value;
  }
  const systemPrompt = args.system_prompt ?? options.systemPrompt;
  return {
    prompt: args.prompt,
    model: args.model ?? (options.models[0] as string),
    budget: budget as AgentBudget,
    tools: await narrowTools(options, args.tools, toolNames),
    ...(systemPrompt === undefined ? {} : { systemPrompt }),
    ...(args.record_result === undefined ? {} : { recordResult: args.record_result }),
  };
}

async function narrowTools(options: ResolvedServerOptions, asked: ToolSelection | undefined, toolNames: () => Promise<readonly string[]>): Promise<ToolSelection> {
  const server = options.tools ?? {};
  if (asked?.policy !== undefined) {
    const known = ['read-only', ...Object.keys(options.policies ?? {})];
    if (!known.includes(asked.policy)) throw new KlymError('INVALID_ARGUMENT', `\`tools.policy\`: "${asked.policy.slice(0, 80)}" is not a policy here; choose one of: ${known.join(', ')}`);
    if (server.policy !== undefined && server.policy !== asked.policy) {
      throw new KlymError('INVALID_ARGUMENT', `\`tools.policy\`: tasks here always run under the policy "${server.policy}"`);
    }
  }
  const policy = server.policy ?? asked?.policy;
  const askedAllow = asked?.allow;
  const deny = [...(server.deny ?? []), ...(asked?.deny ?? [])];
  let allow = server.allow ?? askedAllow;
  if (server.allow !== undefined && askedAllow !== undefined) {
    const names = await toolNames();
    allow = names.filter((name) => matchesAny(name, server.allow ?? []) && matchesAny(name, askedAllow));
  }
  return { ...(allow === undefined ? {} : { allow }), ...(deny.length > 0 ? { deny } : {}), ...(policy === undefined ? {} : { policy }) };
}

/** Whether `name` matches one of `patterns`, where `*` matches any run of characters. */
export function matchesAny(name: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => matchesPattern(name, pattern));
}
