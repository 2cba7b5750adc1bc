/**
 * `@klym/core`: long-lived MCP client sessions to upstream servers, and what runs on them — the surface another
 * agent builds on. Its API is frozen in `api/core.api.md` (see `scripts/api-report.ts`): a change to it is
 * reviewed there. What Klym's own server needs beyond it lives in `@klym/core/internal`, with no such promise.
 * @module
 */
export { KlymError, isKlymError, type KlymErrorCode, type KlymErrorOptions } from './errors.ts';
// the pool
export {
  createSessionPool,
  type CloseOptions,
  type ListToolsOptions,
  type PoolTool,
  type SessionPool,
  type SessionPoolOptions,
  type ToolListing,
} from './pool/session-pool.ts';
export type { PoolClock, PoolTimer } from './pool/clock.ts';
export type { CircuitBreakerStatus } from './pool/circuit-breaker.ts';
export type { SessionScope } from './pool/session-scope.ts';
export type { CallToolOptions, UpstreamCall, UpstreamStatus } from './pool/upstream-status.ts';
export type { TransportKind, UpstreamConfig, UpstreamProtocol } from './pool/upstream-config.ts';
export type { UpstreamAuth } from './pool/upstream-auth.ts';
export type { UpstreamLogEntry } from './pool/upstream-session.ts';
// artifacts
export type { ArtifactLimits } from './artifacts/artifact-limit.ts';
export {
  createArtifactStore,
  createMemoryArtifacts,
  type ArtifactGrep,
  type ArtifactMatch,
  type ArtifactSlice,
  type ArtifactStore,
  type ArtifactStoreOptions,
  type KeepAs,
  type ReadRequest,
  type SliceLine,
} from './artifacts/artifact-store.ts';
export { createArtifactReader, type ArtifactRanges, type ArtifactReader, type ArtifactReaderOptions } from './artifacts/artifact-reader.ts';
export type { ArtifactBackend, ArtifactInfo, ArtifactRecords, QueryPage, StoredArtifact } from './artifacts/artifact-types.ts';
export type { ColumnType } from './artifacts/record-types.ts';
export type { LineIndex } from './artifacts/artifact-text.ts';
export type { QuerySource } from './artifacts/query-text.ts';
export type { RecordsLayout } from './artifacts/artifact-records.ts';
export {
  createArtifactQuery,
  createQueryProcesses,
  type ArtifactQuery,
  type ArtifactQueryOptions,
  type QueryAnswer,
  type QueryCallOptions,
  type QueryColumn,
  type QueryProcesses,
  type QueryProcessesOptions,
  type QueryValue,
} from './artifacts/artifact-query.ts';
// the agent
export { runAgent } from './agent/run-agent.ts';
export { ASK_CALLER_TOOL_NAME, INPUT_REQUIRED, answerAsk, type AskedQuestion, type AskReply } from './agent/ask-caller.ts';
export type { ToolPolicy, ToolProbe, ToolSelection, UpstreamToolRules } from './tools/tool-policy.ts';
export { SELF_CHECK_OK } from './agent/self-check.ts';
export { DEFAULT_SYSTEM_PROMPT, TOOLS_PLACEHOLDER } from './agent/system-prompt.ts';
export { DEFAULT_MODEL_PRICES } from './agent/usage.ts';
export { DEFAULT_CONTEXT_WINDOWS } from './agent/context-window.ts';
export type { AgentEvent } from './agent/agent-event.ts';
export type { CodeEvent, CodeLimits, HostFunctionName } from './code/code-tool.ts';
export type { HostCallRecord, HostCallSave, RecordedHostCall } from './code/program-record.ts';
export type {
  AgentBudget,
  AgentCheckpoint,
  AgentFinishReason,
  AgentRunResult,
  AgentToolCall,
  AgentUsage,
  BudgetName,
  CheckpointTaken,
  ModelPrice,
  InFlightToolCall,
  ModelProviders,
  RunAgentOptions,
  RunSettings,
  RunWiring,
  ToolErrorCode,
} from './agent/types.ts';
export type { PerTaskSetting, ServiceRunSettings } from './agent/run-settings.ts';
// tasks
export { createTaskManager } from './tasks/task-manager.ts';
export type {
  AgentRunner,
  Caller,
  CancelOutcome,
  LogPageRequest,
  StartOptions,
  TaskEvent,
  TaskRefusal,
  TaskManager,
  TaskManagerOptions,
  TaskReading,
} from './tasks/task-manager-types.ts';
export type { PerPrincipalOptions, PrincipalLimits, PrincipalUsage, QuotaName, QuotaView } from './tasks/admission/principal-quotas.ts';
export type { TaskRunDefaults } from './tasks/runner/task-run.ts';
export type { AnnouncedEvent, RunOutcome, TaskConsumer, TaskLease, TaskPlacement, TaskQueue } from './tasks/queue/task-queue.ts';
export type { QueueLogListener } from './tasks/queue/queue-log.ts';
export type { TaskQueriesOptions } from './tasks/runner/task-queries.ts';
export type { WriteBackOptions } from './tasks/runner/write-back.ts';
export { createThreadRunner, type ThreadRunner, type ThreadRunnerOptions } from './tasks/runner/thread-runner.ts';
export { createMemoryTaskStore, type MemoryTaskStoreOptions } from './tasks/store/memory-task-store.ts';
export { openTaskBackend, type TaskBackend, type TaskBackendOptions } from './tasks/task-backend.ts';
export type { BoundedLogOptions, TaskLogPage } from './tasks/store/task-log.ts';
export type {
  AgentEventData,
  Logged,
  LogListRest,
  TaskLogData,
  TaskLogDataByType,
  TaskLogEntry,
  TaskLogEntryOf,
  TaskLogType,
  TaskNoteData,
  TaskNoteType,
  UnknownLogEntry,
} from './tasks/store/log-entry.ts';
export {
  TASK_STATUSES,
  TERMINAL_STATUSES,
  isTerminal,
  type DaySpend,
  type TaskFilter,
  type TaskListPage,
  type TaskPageRequest,
  type TaskPatch,
  type TaskRecord,
  type TaskRequest,
  type TaskResult,
  type TaskStatus,
  type TaskStore,
  type TaskUsage,
  type TaskInput,
  type TaskReply,
  type WriteBackOutcome,
} from './tasks/store/task-types.ts';
// the task service: what the task tools serve, whatever the door
export { createTaskService, type TaskService, type TaskServiceOptions } from './tasks/task-service.ts';
export type {
  BudgetLimitsView,
  TaskBudgetView,
  TaskCancelView,
  TaskReplyView,
  TaskListView,
  TaskStartView,
  TaskStatusView,
  TaskStatusViewOptions,
  TaskSummaryView,
} from './tasks/views/task-views.ts';
export type { TaskLogEntryView, TaskLogLineView, TaskLogPageView, TaskLogView } from './tasks/views/log-views.ts';
export type { TaskArtifactSliceView, TaskArtifactView, TaskQueryView } from './tasks/views/artifact-views.ts';
export {
  cancelTaskSchema,
  replyTaskSchema,
  checkTaskSchema,
  listTasksSchema,
  queryArtifactsSchema,
  readArtifactSchema,
  startTaskSchema,
  taskLogsSchema,
  type CancelTaskArgs,
  type ReplyTaskArgs,
  type CheckTaskArgs,
  type ListTasksArgs,
  type QueryArtifactsArgs,
  type ReadArtifactArgs,
  type StartTaskArgs,
  type TaskLogsArgs,
} from './tasks/task-request.ts';
export type { CapabilitiesView, HealthView, ToolCapabilityView, UpstreamCapabilityView, UpstreamHealthView } from './tasks/views/capabilities.ts';
// webhooks and push
export {
  WEBHOOK_EVENTS,
  type ClaimedWebhookMessage,
  type OutboxEventType,
  type WebhookEndpoint,
  type WebhookEventType,
  type WebhookMessage,
  type WebhookOutbox,
  type WebhookSettlement,
} from './webhooks/webhook-types.ts';
export type { WebhookPayload } from './webhooks/webhook-payload.ts';
export { PUSH_EVENTS, type PushEventType, type PushFormat, type PushOptions, type PushTarget } from './webhooks/push-types.ts';
export type { PushTargetRequest, TaskPush } from './webhooks/task-push.ts';
export type { PushUrlVerdict } from './webhooks/push-allow.ts';
// telemetry
export { TRACER_NAME, type TracingOptions } from './telemetry/tracing.ts';
export type { AgentTracing } from './telemetry/run-tracing.ts';
export type { TraceCarrier } from './telemetry/trace-context.ts';
