/**
 * `@klym/core/server`: what a server that serves Klym's tasks on doors of its own needs beside the task service
 * (`@klym/core`) — the request schemas each door parses its arguments with, so every door accepts and refuses the
 * same input; the views of a log page and an artifact slice; Klym's defaults, which a configuration file shows
 * and a server's settings fall back to; the redaction of secrets from what it logs; the webhooks' and pushes'
 * formats; and the tracer's name. Klym's own server (`@klym/server`) is built on it, and on nothing else beyond
 * `@klym/core` and its other entry points.
 *
 * @example
 * ```ts
 * import { createTaskService } from '@klym/core';
 * import { checkTaskSchema, parseArgs } from '@klym/core/server';
 *
 * const service = createTaskService({ pool });
 * app.get('/tasks/:id', async (c) => c.json(await service.status(parseArgs(checkTaskSchema, { task_id: c.req.param('id') }), principal)));
 * ```
 * @module
 */
// the doors' arguments
export {
  cancelTaskSchema,
  replyTaskSchema,
  checkTaskSchema,
  listTasksSchema,
  queryArtifactsSchema,
  readArtifactSchema,
  startTaskSchema,
  taskLogsSchema,
  parseArgs,
  type CancelTaskArgs,
  type ReplyTaskArgs,
  type CheckTaskArgs,
  type ListTasksArgs,
  type QueryArtifactsArgs,
  type ReadArtifactArgs,
  type StartTaskArgs,
  type TaskLogsArgs,
} from './tasks/task-request.ts';
// views beyond the service's
export { viewLogPage } from './tasks/views/log-views.ts';
export { viewSlice } from './tasks/views/artifact-views.ts';
// settings and their defaults
export { MAX_TIMER_MS, TASK_DEFAULTS, TASK_QUEUE_DEFAULTS, WEBHOOK_DEFAULTS } from './defaults.ts';
export { RUN_SETTINGS, type RunSettingSpec, type RunSettingsTable } from './agent/run-settings.ts';
// secrets
export { createRedactor, secretsOf, type Redactor } from './redact.ts';
export { upstreamAuthSecrets } from './pool/upstream-auth.ts';
export { upstreamSecrets } from './pool/upstream-secrets.ts';
// webhooks and pushes
export { WEBHOOK_EVENTS, type WebhookEndpoint, type WebhookEventType } from './webhooks/webhook-types.ts';
export type { WebhookPayload } from './webhooks/webhook-payload.ts';
export { PUSH_EVENTS, type PushEventType, type PushFormat, type PushOptions, type PushTarget } from './webhooks/push-types.ts';
export type { PushTargetRequest, TaskPush } from './webhooks/task-push.ts';
export type { PushUrlVerdict } from './webhooks/push-allow.ts';
// traces
export { TRACER_NAME, type TracingOptions } from './telemetry/tracing.ts';
