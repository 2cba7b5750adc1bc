/**
 * `@klym/core`: long-lived MCP client sessions to upstream servers, and what runs on them — what an agent that
 * embeds Klym builds on: the session pool, `runAgent`, the task manager and the task service, their errors and
 * their main types. Each further role has its own entry point: `./artifacts` (heavy results kept outside the
 * conversation), `./engine` (the parts below the task manager: its queue, runner thread, log entries), `./server`
 * (serving tasks on your own doors: request schemas, defaults, redaction, webhooks), `./mcp`, `./a2a`, `./sqlite`,
 * `./redis` and `./testing`. Their API is frozen in `api/` (see `scripts/api-report.ts`): a change to it is
 * reviewed there.
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
export type { SessionScope } from './pool/session-scope.ts';
export type { CallToolOptions, UpstreamCall, UpstreamStatus } from './pool/upstream-status.ts';
export type { TransportKind, UpstreamConfig, UpstreamProtocol } from './pool/upstream-config.ts';
export type { UpstreamAuth } from './pool/upstream-auth.ts';
export type { UpstreamLogEntry } from './pool/upstream-session.ts';
// the agent
export { runAgent } from './agent/run-agent.ts';
export { ASK_CALLER_TOOL_NAME, INPUT_REQUIRED, answerAsk, type AskedQuestion, type AskReply } from './agent/ask-caller.ts';
export type { ToolPolicy, ToolProbe, ToolSelection, UpstreamToolRules } from './tools/tool-policy.ts';
export { SELF_CHECK_OK } from './agent/self-check.ts';
export { DEFAULT_SYSTEM_PROMPT, TOOLS_PLACEHOLDER } from './agent/system-prompt.ts';
export { DEFAULT_MODEL_PRICES } from './agent/usage.ts';
export { DEFAULT_CONTEXT_WINDOWS } from './agent/context-window.ts';
export type { AgentEvent } from './agent/agent-event.ts';
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
  ToolErrorCode,
} from './agent/types.ts';
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
export type { PrincipalLimits, PrincipalUsage, QuotaName, QuotaView } from './tasks/admission/principal-quotas.ts';
export { createMemoryTaskStore, type MemoryTaskStoreOptions } from './tasks/store/memory-task-store.ts';
export { openTaskBackend, type TaskBackend, type TaskBackendOptions } from './tasks/task-backend.ts';
export type { TaskLogPage } from './tasks/store/task-log.ts';
export type { TaskLogEntry, TaskLogType } from './tasks/store/log-entry.ts';
export {
  TASK_STATUSES,
  TERMINAL_STATUSES,
  isTerminal,
  type TaskFilter,
  type TaskListPage,
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
export type { CapabilitiesView, HealthView, ToolCapabilityView, UpstreamCapabilityView, UpstreamHealthView } from './tasks/views/capabilities.ts';
