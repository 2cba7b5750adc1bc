/**
 * `@klym/core/internal`: what Klym's own tests and benchmarks need of the engine beyond `@klym/core` and its other
 * entry points — the scripted model, the token counter, the bounded log, write-back's details. Not a public API:
 * nothing here is frozen in `api/`, and any of it may change or go in any release. Klym's server does not import
 * it; build on `@klym/core` and its other entry points.
 * @module
 */
export { MCP_TASK_DEFAULTS } from './defaults.ts';
export type { LanguageModelV4, ScriptedStep } from './agent/language-model.ts';
export { createScriptedModel } from './agent/scripted-model.ts';
export { DROPPED_RESULT_NOTE } from './agent/context-window.ts';
export { createTokenCounter } from './agent/token-count.ts';
export { BoundedLog } from './tasks/store/task-log.ts';
export { PROMPT_PROVENANCE_CHARS, dayIdOf } from './tasks/runner/write-back.ts';
