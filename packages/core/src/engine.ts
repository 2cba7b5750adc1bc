/**
 * `@klym/core/engine`: the parts below the task manager, for an agent that replaces one of them or wires them
 * itself — the task queue's contract (a queue of your own behind `createTaskManager`'s `queue`), the runner
 * thread, the task store's write side and webhook outbox (a store of your own), the task log's entries, the
 * run's wiring and settings, the code tool's records, the pool's clock, and tracing's context.
 *
 * @example
 * ```ts
 * import { createSessionPool, createTaskManager } from '@klym/core';
 * import { createThreadRunner } from '@klym/core/engine';
 *
 * const pool = await createSessionPool({ upstreams });
 * const runner = createThreadRunner({ upstreams }); // each run on a worker thread, off the main one
 * const manager = createTaskManager({ pool, run: runner });
 * ```
 * @module
 */
// the pool
export type { PoolClock, PoolTimer } from './pool/clock.ts';
export type { CircuitBreakerStatus } from './pool/circuit-breaker.ts';
// the agent
export type { RunWiring } from './agent/types.ts';
export type { PerTaskSetting, ServiceRunSettings } from './agent/run-settings.ts';
export type { CodeEvent, CodeLimits, HostFunctionName } from './code/code-tool.ts';
export type { HostCallRecord, HostCallSave, RecordedHostCall } from './code/program-record.ts';
export type { AgentTracing } from './agent/agent-tracing.ts';
export type { TraceCarrier } from './telemetry/trace-context.ts';
// the task manager's parts
export type { PerPrincipalOptions } from './tasks/admission/principal-quotas.ts';
export type { TaskRunDefaults } from './tasks/runner/task-run.ts';
export type { AnnouncedEvent, RunOutcome, TaskConsumer, TaskLease, TaskPlacement, TaskQueue } from './tasks/queue/task-queue.ts';
export type { QueueLogListener } from './tasks/queue/queue-log.ts';
export type { TaskQueriesOptions } from './tasks/runner/task-queries.ts';
export type { WriteBackOptions } from './tasks/runner/write-back.ts';
export { createThreadRunner, type ThreadRunner, type ThreadRunnerOptions } from './tasks/runner/thread-runner.ts';
// the task store's other side: what a store of your own implements
export type { DaySpend, TaskPageRequest, TaskPatch } from './tasks/store/task-types.ts';
export type { BoundedLogOptions } from './tasks/store/task-log.ts';
export type {
  AgentEventData,
  Logged,
  LogListRest,
  TaskLogData,
  TaskLogDataByType,
  TaskLogEntryOf,
  TaskNoteData,
  TaskNoteType,
  UnknownLogEntry,
} from './tasks/store/log-entry.ts';
export type { ClaimedWebhookMessage, OutboxEventType, WebhookMessage, WebhookOutbox, WebhookSettlement } from './webhooks/webhook-types.ts';
