import {
  TASK_STATUSES,
  type PrincipalUsage,
  type TaskEvent,
  type TaskRefusal,
  type TaskService,
  type TaskStatus,
  type UpstreamCall,
  type UpstreamStatus,
} from '@klym/core';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ServerLog } from '../server/server-options.ts';
import { registerPrincipalMetrics } from './principal-metrics.ts';
import { readNamedUse } from './principal-use.ts';

/** Options of {@link createKlymMetrics}. */
export interface KlymMetricsOptions {
  /** The model names tasks may name (the server's `models`); any other is labelled `other`. @default every name is kept */
  readonly models?: readonly string[];
  /** The principals labelled by name (the configured ones: see `principalNames`); every other is `other`. @default none: all are `other` */
  readonly principals?: readonly string[];
  /** Where a scrape that could not read the task store says so. @default nothing is logged */
  readonly log?: ServerLog;
  /** Process and event-loop metrics (prom-client's defaults), collected from the first scrape on. @default true */
  readonly processMetrics?: boolean;
}

/** One process's metrics, in the Prometheus text format: tasks, the queue, upstream calls and states, LLM tokens and cost. */
export interface KlymMetrics {
  /** The registry they are kept in: this server's own, never prom-client's global one. */
  readonly registry: Registry;
  /** Counts an upstream tool call (a pool's `onCall`, on the main thread or the runner thread). */
  observeCall(call: UpstreamCall): void;
  /** The calls this process made to each upstream so far, the runner thread's included: for the dashboard. */
  callTotals(): ReadonlyMap<string, CallTotals>;
  /** Counts what a task event says happened in this process (a service's `onEvent`); events heard from another process are left to it. */
  observeTaskEvent(event: TaskEvent): void;
  /** Counts a start refused over a limit (a service's `onRefuse`), by principal and quota. */
  observeRefusal(refusal: TaskRefusal): void;
  /** Reads task counts, each named principal's use and upstream states from `service` at each scrape. Returns the function that stops it. */
  watch(service: TaskService): () => void;
  /** The metrics now, as a scrape answers them. */
  render(): Promise<{ readonly contentType: string; readonly body: string }>;
}

/** What one upstream's calls came to in this process. */
export interface CallTotals {
  readonly succeeded: number;
  /** Calls that ended in an error or an `isError` result. */
  readonly failed: number;
  /** Milliseconds the calls took, summed. */
  readonly totalMs: number;
}

const STATUSES: readonly TaskStatus[] = TASK_STATUSES;
const UPSTREAM_STATES: readonly UpstreamStatus['state'][] = ['connecting', 'ready', 'down', 'closed'];
/** Seconds: a task runs from seconds to its 30-minute default limit, and may wait in the queue before. */
const TASK_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600];
/** Seconds: a graph query answers in milliseconds, a slow tool in a minute or two. */
const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/**
 * Creates the server's metrics in a registry of their own. Every label is bounded: statuses and upstream
 * states are fixed sets; upstreams are the configured ones; a tool is named only if its upstream listed it
 * (else `other`); outcomes are `ok`, `tool-error` or an error code; models are the configured ones; principals
 * are the configured ones (`principals`), every other `other`. No task id, caller-made principal or prompt is
 * ever a label.
 *
 * Counters count what happened in this process since it started; `klym_tasks`, `klym_queue_depth` and the
 * `klym_principal_*` gauges are read from the task store at each scrape, so on a shared store every process
 * reports the same; a scrape reads the store's counts once, and each named principal's use once.
 */
export function createKlymMetrics(options: KlymMetricsOptions = {}): KlymMetrics {
  const registry = new Registry();
  const registers = [registry];
  const models = options.models === undefined ? undefined : new Set(options.models);
  const modelOf = (event: { readonly task: { readonly request: { readonly model?: string } } }): string => {
    const model = event.task.request.model ?? 'default';
    return models === undefined || models.has(model) ? model : 'other';
  };
  let readTasks: (() => Promise<Readonly<Record<TaskStatus, number>>>) | undefined;
  /** The task counts of the scrape under way: read once for `klym_tasks`, `klym_queue_depth` and the `other` principals. */
  let counting: Promise<Readonly<Record<TaskStatus, number>> | undefined> = Promise.resolve(undefined);
  let readUpstreams: (() => Readonly<Record<string, UpstreamStatus>>) | undefined;
  let readPrincipals: (() => Promise<readonly PrincipalUsage[]>) | undefined;
  const principals = registerPrincipalMetrics(registry, { principals: options.principals ?? [], log: options.log });

  const tasks = new Gauge({
    name: 'klym_tasks',
    help: 'Tasks in the task store, by status (on a shared store, every process reports the same)',
    labelNames: ['status'],
    registers,
    collect: async () => {
      const counts = await counting;
      tasks.reset();
      if (counts !== undefined) for (const status of STATUSES) tasks.set({ status }, counts[status] ?? 0);
    },
  });
  const queueDepth = new Gauge({
    name: 'klym_queue_depth',
    help: 'Tasks waiting to run (pending)',
    registers,
    collect: async () => {
      const counts = await counting;
      queueDepth.reset();
      if (counts !== undefined) queueDepth.set(counts.pending ?? 0);
    },
  });
  const started = new Counter({ name: 'klym_tasks_started_total', help: 'Tasks that began running in this process', registers });
  const resumed = new Counter({
    name: 'klym_tasks_resumed_total',
    help: 'Tasks resumed from their checkpoint in this process (after a restart, or from another worker)',
    registers,
  });
  const duration = new Histogram({
    name: 'klym_task_duration_seconds',
    help: "Time from a task's start request to its end, queue wait included, by final status; observed where it ended",
    labelNames: ['status'],
    buckets: TASK_BUCKETS,
    registers,
  });
  const calls = new Counter({
    name: 'klym_upstream_calls_total',
    help: 'Upstream tool calls, by upstream, tool and outcome',
    labelNames: ['upstream', 'tool', 'outcome'],
    registers,
  });
  const callDuration = new Histogram({
    name: 'klym_upstream_call_duration_seconds',
    help: 'Upstream tool call duration, waiting for a session included, by upstream, tool and outcome',
    labelNames: ['upstream', 'tool', 'outcome'],
    buckets: CALL_BUCKETS,
    registers,
  });
  const upstreamState = new Gauge({
    name: 'klym_upstream_state',
    help: "Each upstream's state as this process's pool sees it: 1 for the state it is in, 0 for the others",
    labelNames: ['upstream', 'state'],
    registers,
    collect: () => {
      upstreamState.reset();
      for (const [upstream, status] of Object.entries(readUpstreams?.() ?? {})) {
        for (const state of UPSTREAM_STATES) upstreamState.set({ upstream, state }, status.state === state ? 1 : 0);
      }
    },
  });
  const tokens = new Counter({
    name: 'klym_llm_tokens_total',
    help: 'LLM tokens of the steps run in this process, by model and kind (input, output)',
    labelNames: ['model', 'kind'],
    registers,
  });
  const cost = new Counter({
    name: 'klym_llm_cost_usd_total',
    help: 'What the steps run in this process cost, in USD, by model (models without a price count nothing)',
    labelNames: ['model'],
    registers,
  });

  async function countsOrNothing(): Promise<Readonly<Record<TaskStatus, number>> | undefined> {
    try {
      return await readTasks?.();
    } catch (error) {
      // Left out of this scrape rather than reported stale: an absent series says the store did not answer.
      options.log?.(`klym: metrics could not count the tasks: ${error instanceof Error ? error.message : String(error)}`, 'warning');
      return undefined;
    }
  }

  let processMetrics = options.processMetrics ?? true;
  const totals = new Map<string, { succeeded: number; failed: number; totalMs: number }>();
  return {
    registry,
    observeCall(call) {
      const labels = { upstream: call.upstream, tool: call.listed ? call.toolName : 'other', outcome: call.outcome };
      calls.inc(labels);
      callDuration.observe(labels, call.durationMs / 1000);
      const total = totals.get(call.upstream) ?? { succeeded: 0, failed: 0, totalMs: 0 };
      if (call.outcome === 'ok') total.succeeded++;
      else total.failed++;
      total.totalMs += call.durationMs;
      totals.set(call.upstream, total);
    },
    callTotals: () => totals,
    observeRefusal: (refusal) => principals.observeRefusal(refusal),
    observeTaskEvent(event) {
      switch (event.type) {
        case 'task-start':
          if (event.elsewhere !== true) started.inc();
          break;
        case 'task-resume':
          if (event.elsewhere !== true) resumed.inc();
          break;
        case 'task-end': {
          const { task } = event;
          if (event.elsewhere === true || task.finishedAt === undefined) break;
          duration.observe({ status: task.status }, Math.max(0, Date.parse(task.finishedAt) - Date.parse(task.createdAt)) / 1000);
          break;
        }
        case 'task-step': {
          const model = modelOf(event);
          tokens.inc({ model, kind: 'input' }, event.usage.inputTokens);
          tokens.inc({ model, kind: 'output' }, event.usage.outputTokens);
          cost.inc({ model }, event.costUsd ?? 0);
          break;
        }
        default:
          break;
      }
    },
    watch(service) {
      readTasks = () => service.tasks.summary();
      readUpstreams = () => service.pool.status();
      const names = options.principals ?? [];
      readPrincipals = () => readNamedUse(service, names);
      return () => {
        readTasks = undefined;
        readUpstreams = undefined;
        readPrincipals = undefined;
      };
    },
    async render() {
      if (processMetrics) {
        // Registered at the first scrape: their monitors (event-loop delay, GC) run for the process's life,
        // which a server that is never scraped (a test's, a library user's) need not pay for.
        processMetrics = false;
        registerProcessMetrics(registry);
      }
      counting = countsOrNothing();
      principals.scrape(readPrincipals, counting);
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}

/**
 * prom-client's defaults, with the CPU counters made totals since the process started, as Prometheus's own
 * clients report them: prom-client counts from the moment they are registered, which here is the first scrape.
 */
function registerProcessMetrics(registry: Registry): void {
  const before = process.cpuUsage();
  collectDefaultMetrics({ register: registry });
  const add = (name: string, micros: number): void => {
    (registry.getSingleMetric(name) as Counter | undefined)?.inc(micros / 1e6);
  };
  add('process_cpu_user_seconds_total', before.user);
  add('process_cpu_system_seconds_total', before.system);
  add('process_cpu_seconds_total', before.user + before.system);
}
