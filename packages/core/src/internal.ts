/**
 * `@klym/core/internal`: what Klym's own server, tests and benchmarks need of the engine beyond `@klym/core` —
 * defaults, redaction, request parsing, log and slice views, test hooks. Not a public API: nothing here is frozen in
 * `api/`, and any of it may change or go in any release. Build on `@klym/core` and its other entry points.
 * @module
 */
export { createRedactor, secretsOf } from './redact.ts';
export { ARTIFACT_DEFAULTS, MAX_TIMER_MS, MCP_TASK_DEFAULTS, TASK_DEFAULTS, TASK_QUEUE_DEFAULTS, WEBHOOK_DEFAULTS } from './defaults.ts';
export { upstreamAuthSecrets } from './pool/upstream-auth.ts';
export { QUERY_DEFAULTS } from './artifacts/artifact-query.ts';
export type { LanguageModelV4, ScriptedStep } from './agent/language-model.ts';
export { createScriptedModel } from './agent/scripted-model.ts';
export { DROPPED_RESULT_NOTE } from './agent/context-window.ts';
export { createTokenCounter } from './agent/token-count.ts';
export { RUN_SETTINGS } from './agent/run-settings.ts';
export { BoundedLog } from './tasks/store/task-log.ts';
export { viewLogPage } from './tasks/views/log-views.ts';
export { viewSlice } from './tasks/views/artifact-views.ts';
export { parseArgs } from './tasks/task-request.ts';
export { PROMPT_PROVENANCE_CHARS, dayIdOf } from './tasks/runner/write-back.ts';
