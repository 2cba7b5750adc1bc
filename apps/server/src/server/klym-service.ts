import {
  createSessionPool,
  createTaskManager,
  viewLogPage,
  viewTask,
  type PoolTool,
  type SessionPool,
  type TaskEvent,
  type TaskManager,
} from '@klym/core';
import type { KlymServerOptions, ResolvedServerOptions } from './server-options.ts';
import { resolveServerOptions } from './server-options.ts';
import { cancelTaskShape, checkTaskShape, listTasksShape, matchesAny, parseArgs, startTaskShape, toTaskRequest } from './task-request.ts';

/** The task operations both the MCP tools and the REST API serve: arguments in, JSON out, per principal. */
export interface KlymService {
  readonly options: ResolvedServerOptions;
  readonly pool: SessionPool;
  readonly tasks: TaskManager;
  startTask(args: unknown, principal: string): Promise<Record<string, unknown>>;
  checkTask(args: unknown, principal: string): Promise<Record<string, unknown>>;
  taskLogs(args: { task_id: string; after?: number; limit?: number }, principal: string): Promise<Record<string, unknown>>;
  cancelTask(args: unknown, principal: string): Promise<Record<string, unknown>>;
  listTasks(args: unknown, principal: string): Promise<Record<string, unknown>>;
  describeCapabilities(): Promise<Record<string, unknown>>;
  health(): Promise<Record<string, unknown>>;
  /** Task lifecycle events; returns the unsubscribe function. */
  onTaskEvent(listener: (event: TaskEvent) => void): () => void;
  /** Closes the task manager (grace period, then cancel with "shutdown"), then the pool if it opened it. Idempotent. */
  close(): Promise<void>;
}

/** Opens the pool (unless one is given) and the task manager, and wraps them as {@link KlymService}. */
export async function createKlymService(input: KlymServerOptions): Promise<KlymService> {
  const options = resolveServerOptions(input);
  const pool = options.pool ?? (await createSessionPool({ upstreams: options.upstreams ?? {} }));
  const listeners = new Set<(event: TaskEvent) => void>();
  const tasks = createTaskManager({
    pool,
    ...(options.taskStore === undefined ? {} : { store: options.taskStore }),
    ...(options.taskLog === undefined ? {} : { log: options.taskLog }),
    ...(options.run === undefined ? {} : { run: options.run }),
    ...(options.maxConcurrentTasks === undefined ? {} : { maxConcurrent: options.maxConcurrentTasks }),
    ...(options.maxQueuedTasks === undefined ? {} : { maxQueued: options.maxQueuedTasks }),
    taskTimeoutMs: options.taskTimeoutMs ?? 1_800_000,
    ...(options.taskTtlMs === undefined ? {} : { ttlMs: options.taskTtlMs }),
    ...(options.writeBack === undefined ? {} : { writeBack: options.writeBack }),
    secrets: [...Object.values(options.auth?.tokens ?? {}), ...(options.secrets ?? [])],
    defaults: {
      ...(options.providers === undefined ? {} : { providers: options.providers }),
      ...(options.prices === undefined ? {} : { prices: options.prices }),
      ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
      ...(options.upstreamTools === undefined ? {} : { upstreamTools: options.upstreamTools }),
      ...(options.policies === undefined ? {} : { policies: options.policies }),
      ...(options.readOnlyTools === undefined ? {} : { readOnlyTools: options.readOnlyTools }),
    },
    onEvent: (event) => listeners.forEach((listener) => listener(event)),
  });
  // Upstream errors may quote a configured credential (a URL's userinfo, a header); the task manager redacts its own.
  const secrets = [
    ...Object.values(options.auth?.tokens ?? {}),
    ...(options.secrets ?? []),
    options.providers?.openai?.apiKey,
    options.providers?.google?.apiKey,
    options.providers?.compatible?.apiKey,
  ].filter((secret): secret is string => typeof secret === 'string' && secret.length > 0);
  const hideSecrets = (text: string): string => secrets.reduce((shown, secret) => shown.split(secret).join('[redacted]'), text);
  const toolNames = async (): Promise<readonly string[]> => (await pool.listTools()).tools.map((tool) => tool.name);
  let closing: Promise<void> | undefined;

  return {
    options,
    pool,
    tasks,
    async startTask(args, principal) {
      const request = await toTaskRequest(parseArgs(startTaskShape, args), options, toolNames);
      const task = await tasks.start(request, { principal });
      return { task_id: task.id, status: task.status, model: request.model, budget: wireBudget(request.budget ?? {}) };
    },
    async checkTask(args, principal) {
      const parsed = parseArgs(checkTaskShape, args);
      const task = await tasks.get(parsed.task_id, { principal });
      const page =
        parsed.log_after === undefined
          ? await tasks.tail(task.id, { principal }, parsed.max_log_entries ?? 3)
          : await tasks.logs(task.id, { principal }, { after: parsed.log_after, limit: parsed.max_log_entries ?? 20 });
      return viewTask(task, page, { fullResult: parsed.full_result ?? false, fullEntries: parsed.log_after !== undefined });
    },
    async taskLogs(args, principal) {
      const page = await tasks.logs(args.task_id, { principal }, { after: args.after ?? 0, limit: Math.min(args.limit ?? 100, 500) });
      return { task_id: args.task_id, ...viewLogPage(page, true) };
    },
    async cancelTask(args, principal) {
      const parsed = parseArgs(cancelTaskShape, args);
      const outcome = await tasks.cancel(parsed.task_id, { principal });
      return { task_id: outcome.task.id, cancelled: outcome.cancelled, status: outcome.task.status, message: outcome.message };
    },
    async listTasks(args, principal) {
      const parsed = parseArgs(listTasksShape, args);
      const all = await tasks.list({ principal }, parsed.status === undefined ? {} : { status: parsed.status });
      const shown = all.slice(0, 50).map((task) => ({
        task_id: task.id,
        status: task.status,
        step: task.currentStep,
        created_at: task.createdAt,
        ...(task.finishedAt ? { finished_at: task.finishedAt } : {}),
        prompt: task.request.prompt.length > 80 ? `${task.request.prompt.slice(0, 80)}…` : task.request.prompt,
      }));
      return { tasks: shown, total: all.length, ...(all.length > shown.length ? { more: all.length - shown.length } : {}) };
    },
    async describeCapabilities() {
      const listing = await pool.listTools();
      const status = pool.status();
      const allowed = listing.tools.filter((tool) => permitted(tool, options));
      return {
        upstreams: Object.fromEntries(
          Object.entries(listing.upstreams).map(([name, report]) => [
            name,
            { state: status[name]?.state, ...(report.ok ? { tools: report.toolCount } : { error: hideSecrets(report.error.message) }) },
          ]),
        ),
        tools: allowed.map((tool) => ({ name: tool.name, ...(tool.annotations?.readOnlyHint ? { read_only: true } : {}), description: (tool.description ?? '').slice(0, 160) })),
        models: options.models,
        default_model: options.models[0],
        policies: ['read-only', ...Object.keys(options.policies ?? {})],
        server_tool_policy: options.tools ?? {},
        budget: { default: wireBudget(options.defaultBudget), max: wireBudget(options.maxBudget) },
        record_result_default: options.writeBack?.byDefault ?? false,
      };
    },
    async health() {
      const status = pool.status();
      const upstreams = Object.fromEntries(
        Object.entries(status).map(([name, upstream]) => [name, { state: upstream.state, transport: upstream.transport, sessions: upstream.sessions.live, breaker: upstream.breaker.state }]),
      );
      const healthy = Object.values(status).every((upstream) => upstream.state === 'ready');
      return { status: healthy ? 'ok' : 'degraded', upstreams, tasks: await tasks.summary() };
    },
    onTaskEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      closing ??= (async () => {
        await tasks.close({ graceMs: options.shutdownGraceMs, reason: 'shutdown' });
        if (options.pool === undefined) await pool.close();
      })();
      return closing;
    },
  };
}

function wireBudget(budget: { maxSteps?: number; maxTokens?: number; maxCostUsd?: number; timeoutMs?: number }): Record<string, number> {
  return Object.fromEntries(
    [
      ['max_steps', budget.maxSteps],
      ['max_tokens', budget.maxTokens],
      ['max_cost_usd', budget.maxCostUsd],
      ['timeout_ms', budget.timeoutMs],
    ].filter((entry): entry is [string, number] => entry[1] !== undefined),
  );
}

/** Whether the server's own tool selection lets tasks call `tool` (a caller may narrow it further). */
function permitted(tool: PoolTool, options: ResolvedServerOptions): boolean {
  const selection = options.tools ?? {};
  if (selection.allow !== undefined && !matchesAny(tool.name, selection.allow)) return false;
  if (matchesAny(tool.name, selection.deny ?? [])) return false;
  if (selection.policy === undefined) return true;
  const policy = selection.policy === 'read-only' ? { readOnly: true } : options.policies?.[selection.policy];
  if (policy === undefined) return false;
  if (policy.allow !== undefined && !matchesAny(tool.name, policy.allow)) return false;
  if (matchesAny(tool.name, policy.deny ?? [])) return false;
  return !policy.readOnly || tool.annotations?.readOnlyHint === true || matchesAny(tool.name, options.readOnlyTools ?? []);
}
