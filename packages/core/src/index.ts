/**
 * `@klym/core`: long-lived MCP client sessions to upstream servers, and what runs on them.
 * @module
 */
export { KlymError, isKlymError, type KlymErrorCode, type KlymErrorOptions } from './errors.ts';
export { REDACTED, createRedactor, secretsOf, type Redactor } from './redact.ts';
export {
  ARTIFACT_DEFAULTS,
  CONTEXT_DEFAULTS,
  DEFAULT_MAX_RETRIES,
  DEFAULT_MAX_STEPS,
  MAX_TIMER_MS,
  MCP_TASK_DEFAULTS,
  REDIS_DEFAULTS,
  TASK_DEFAULTS,
  TASK_QUEUE_DEFAULTS,
  UPSTREAM_DEFAULTS,
  WEBHOOK_DEFAULTS,
} from './defaults.ts';
export {
  createSessionPool,
  type CloseOptions,
  type ListToolsOptions,
  type PoolTool,
  type SessionPool,
  type SessionPoolOptions,
  type ToolListing,
} from './pool/session-pool.ts';
export type { SessionScope } from './pool/session-scope.ts';
export type { CallToolOptions, UpstreamCall, UpstreamStatus } from './pool/upstream-status.ts';
export type { TransportKind, UpstreamConfig, UpstreamProtocol } from './pool/upstream-config.ts';
export { upstreamAuthSecrets, type UpstreamAuth } from './pool/upstream-auth.ts';
export type { UpstreamLogEntry } from './pool/upstream-session.ts';
export { BUILT_IN_NAMESPACE, MAX_TOOL_NAME_LENGTH, TOOL_NAME_SEPARATOR, namespaceToolName } from './pool/tool-name.ts';
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
export { ARTIFACT_TOOL_NAMES, artifactReference, artifactTools, keepBigResult, type ArtifactQuerying, type ResultKeeping } from './artifacts/artifact-tools.ts';
export type { ArtifactBackend, ArtifactInfo, ArtifactRecords, StoredArtifact } from './artifacts/artifact-types.ts';
export { recordsFrom, recordsOf, type RecordsLayout } from './artifacts/artifact-records.ts';
export { QUERY_DEFAULTS, createArtifactQuery, toCsv, type ArtifactQuery, type ArtifactQueryOptions, type QueryAnswer } from './artifacts/artifact-query.ts';
export { createTaskQueries, type TaskQueries, type TaskQueriesOptions } from './tasks/runner/task-queries.ts';
// tools and the agent
export {
  createToolCatalog,
  type CatalogTool,
  type CatalogUpstream,
  type ToolCallHooks,
  type ToolCatalog,
  type ToolCatalogOptions,
} from './tools/tool-catalog.ts';
export {
  READ_ONLY_POLICY,
  isReadOnlyTool,
  matchesPattern,
  toolAccess,
  type AccessRules,
  type ToolAccess,
  type ToolPolicy,
  type ToolProbe,
  type ToolSelection,
  type UpstreamToolRules,
} from './tools/tool-policy.ts';
export type { ResolvedProbe } from './tools/tool-probe.ts';
export { resultText, toModelOutput, type ToolResultOutput } from './tools/tool-result.ts';
export { describeTools } from './tools/tools-prompt.ts';
export { runAgent } from './agent/run-agent.ts';
export { removeOrphanedToolCalls } from './agent/history.ts';
export type { LanguageModelV4, ScriptedStep } from './agent/language-model.ts';
export { resolveModel, type ResolvedModel } from './agent/model-resolver.ts';
export { createScriptedModel, type ScriptedCall, type ScriptedModelOptions } from './agent/scripted-model.ts';
export { SELF_CHECK_OK, type RunContext } from './agent/self-check.ts';
export { DEFAULT_SYSTEM_PROMPT, TOOLS_PLACEHOLDER } from './agent/system-prompt.ts';
export { DEFAULT_MODEL_PRICES } from './agent/usage.ts';
export {
  DEFAULT_CONTEXT_WINDOWS,
  DROPPED_RESULT_NOTE,
  answerReserve,
  contextLengthExceeded,
  contextWindowOf,
  createContextWindow,
  type ContextLengthExceeded,
  type ContextWindow,
  type ContextWindowOptions,
  type ModelContextWindow,
  type WindowFit,
} from './agent/context-window.ts';
export { createTokenCounter, estimateTokens, tokenizerOf, type TokenCounter, type TokenizerName } from './agent/token-count.ts';
export type {
  AgentBudget,
  AgentCheckpoint,
  AgentEvent,
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
  ToolErrorCode,
} from './agent/types.ts';
export { RUN_SETTINGS, type RunSettingSpec, type RunSettingsTable, type ServiceRunSettings } from './agent/run-settings.ts';
// tasks
export {
  createTaskManager,
  type AgentRunner,
  type Caller,
  type CancelOutcome,
  type LogPageRequest,
  type StartOptions,
  type TaskEvent,
  type TaskRefusal,
  type TaskManager,
  type TaskManagerOptions,
  type TaskReading,
} from './tasks/task-manager.ts';
export {
  viewQuota,
  type PerPrincipalOptions,
  type PrincipalLimits,
  type PrincipalUsage,
  type QuotaName,
  type QuotaView,
} from './tasks/admission/principal-quotas.ts';
export type { TaskRunDefaults } from './tasks/runner/task-run.ts';
export { createInProcessTaskQueue } from './tasks/queue/in-process-queue.ts';
export type { RunOutcome, TaskConsumer, TaskLease, TaskPlacement, TaskQueue } from './tasks/queue/task-queue.ts';
export { createThreadRunner, type ThreadRunner, type ThreadRunnerOptions } from './tasks/runner/thread-runner.ts';
export { createMemoryTaskStore, type MemoryTaskStoreOptions } from './tasks/store/memory-task-store.ts';
export { openTaskBackend, type TaskBackend, type TaskBackendOptions } from './tasks/task-backend.ts';
export { BoundedLog, type BoundedLogOptions, type TaskLogPage } from './tasks/store/task-log.ts';
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
  TERMINAL_STATUSES,
  isTerminal,
  type TaskFilter,
  type TaskListPage,
  type TaskPageRequest,
  type TaskPatch,
  type TaskRecord,
  type TaskRequest,
  type TaskResult,
  type TaskStatus,
  type TaskStore,
  type DaySpend,
  type TaskUsage,
  type WriteBackOutcome,
} from './tasks/task-types.ts';
export {
  MAX_GLANCE_CHARS,
  viewBudgetLimits,
  viewLogPage,
  viewTaskList,
  viewTaskStatus,
  viewTaskSummary,
  type BudgetLimitsView,
  type TaskBudgetView,
  type TaskCancelView,
  type TaskListView,
  type TaskLogEntryView,
  type TaskLogLineView,
  type TaskLogPageView,
  type TaskLogView,
  type TaskStartView,
  type TaskStatusView,
  type TaskStatusViewOptions,
  type TaskSummaryView,
} from './tasks/views/task-views.ts';
export { createTaskService, type TaskService, type TaskServiceOptions } from './tasks/task-service.ts';
export { viewArtifact, viewSlice, type TaskArtifactSliceView, type TaskArtifactView, type TaskQueryView } from './tasks/views/artifact-views.ts';
export {
  cancelTaskSchema,
  checkTaskSchema,
  listTasksSchema,
  parseArgs,
  queryArtifactsSchema,
  readArtifactSchema,
  startTaskSchema,
  taskLogsSchema,
  type CancelTaskArgs,
  type CheckTaskArgs,
  type ListTasksArgs,
  type QueryArtifactsArgs,
  type ReadArtifactArgs,
  type StartTaskArgs,
  type TaskLogsArgs,
} from './tasks/task-request.ts';
export {
  type CapabilitiesView,
  type HealthView,
  type ToolCapabilityView,
  type UpstreamCapabilityView,
  type UpstreamHealthView,
} from './tasks/views/capabilities.ts';
export { PROMPT_PROVENANCE_CHARS, dayIdOf, writeBackResult, type WriteBackOptions, type WriteBackProvenance } from './tasks/runner/write-back.ts';
// webhooks
export { createWebhookDispatcher, type WebhookDispatcher, type WebhookDispatcherOptions } from './webhooks/webhook-dispatcher.ts';
export type { WebhookPayload } from './webhooks/webhook-payload.ts';
export {
  ANY_PUBLIC_URL,
  MAX_PUSH_URL_LENGTH,
  createPushAllowList,
  isNonPublicAddress,
  type HostLookup,
  type PushAllowList,
  type PushAllowListOptions,
  type PushUrlVerdict,
} from './webhooks/push-allow.ts';
export { PUSH_EVENTS, type PushEventType, type PushFormat, type PushOptions, type PushTarget } from './webhooks/push-types.ts';
export type { PushTargetRequest, TaskPush } from './webhooks/task-push.ts';
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
// telemetry
export { TRACER_NAME, type TracingOptions } from './telemetry/tracing.ts';
export type { AgentTracing } from './telemetry/run-tracing.ts';
export { carrierOf, contextOf, traceCarrierOf, type TraceCarrier } from './telemetry/trace-context.ts';
