import type { CodeLimits } from '../code/code-tool.ts';
import type { LanguageModel, ModelMessage, ToolResultPart } from 'ai';
import type { KlymErrorCode } from '../errors.ts';
import type { SessionPool } from '../pool/session-pool.ts';
import type { SessionScope } from '../pool/session-scope.ts';
import type { AgentTracing } from './agent-tracing.ts';
import type { ToolPolicy, ToolProbe, ToolSelection, UpstreamToolRules } from '../tools/tool-policy.ts';
import type { ArtifactBackend } from '../artifacts/artifact-types.ts';
import type { AgentEvent } from './agent-event.ts';
import type { AskedQuestion } from './ask-caller.ts';
import type { HostCallRecord } from '../code/program-record.ts';

export type { ToolPolicy, ToolProbe, ToolSelection, UpstreamToolRules };

/** Limits of one run. Hitting one ends the run with `finishReason: "budget:<name>"`, its partial text kept. */
export interface AgentBudget {
  /** LLM steps (calls to the model). @default 25 */
  readonly maxSteps?: number;
  /** Input plus output tokens over the whole run. @default unlimited */
  readonly maxTokens?: number;
  /** Cost in USD, from the price table; with no price for the model, only the token budget applies. @default unlimited */
  readonly maxCostUsd?: number;
  /** Wall-clock time of the run, in milliseconds. @default unlimited */
  readonly timeoutMs?: number;
}

/**
 * The name of a budget, as `finishReason: "budget:<name>"` and the `budget` event say it: the run's own, or
 * one kept outside it that `budgetSignal` reports (a principal's spend for the day: `tokensPerDay`, `usdPerDay`).
 */
export type BudgetName = 'steps' | 'tokens' | 'cost' | 'time' | 'tokensPerDay' | 'usdPerDay';

/** Price of a model, in USD per million tokens. */
export interface ModelPrice {
  readonly inputPerMillion: number;
  readonly outputPerMillion: number;
}

/** How a model name is turned into a provider model. Keys and base URLs are passed in; core never reads `process.env`. */
export interface ModelProviders {
  /** OpenAI. `api: 'responses'` (the default) calls `POST /v1/responses`; `'chat'` calls `POST /v1/chat/completions`. */
  readonly openai?: { readonly apiKey: string; readonly baseURL?: string; readonly api?: 'responses' | 'chat' };
  /** Google's Gemini API (`streamGenerateContent`). */
  readonly google?: { readonly apiKey: string; readonly baseURL?: string };
  /** Any OpenAI-compatible endpoint (Ollama, vLLM, LM Studio), named `compatible:<model>`; spoken to over chat completions. */
  readonly compatible?: { readonly baseURL: string; readonly apiKey?: string };
}

/** Token use; `estimated` when the provider reported none (or not all) and ~4 characters per token was assumed. */
export interface AgentUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly totalTokens: number;
  readonly estimated: boolean;
}

/** One tool call of a run, as the result lists it. */
export interface AgentToolCall {
  readonly step: number;
  readonly toolCallId: string;
  /** Namespaced name, as the model called it. */
  readonly toolName: string;
  readonly args: unknown;
  /** Whether the call produced a result (an `isError: true` result counts as `ok: false`). */
  readonly ok: boolean;
  readonly durationMs: number;
  /** Why it failed (denied, upstream error, invalid arguments, unknown tool, `isError`), when `ok` is false. */
  readonly error?: string;
}

/**
 * How a run ended: the model's own reason (`stop`, `length`, `content-filter`, `other`, …),
 * `budget:<steps|tokens|cost|time>` when a budget ran out, `cancelled` when the caller's signal aborted, or
 * `input-required` when it stopped to ask its caller (`askCaller`).
 */
export type AgentFinishReason = string;

/** What {@link runAgent} resolves with. A run that hit a budget or was cancelled still resolves, with its partial text. */
export interface AgentRunResult {
  /**
   * Everything the model wrote, step by step, separated by blank lines; partial text of an interrupted step
   * included, and a resumed checkpoint's texts first.
   */
  readonly text: string;
  readonly finishReason: AgentFinishReason;
  /** LLM steps started, a resumed checkpoint's included. */
  readonly steps: number;
  /** A resumed checkpoint's included. */
  readonly usage: AgentUsage;
  /** `undefined` when the model has no price in the table. */
  readonly costUsd: number | undefined;
  /** The calls made by this `runAgent` call; those of a resumed checkpoint are only counted there (its `toolCalls`). */
  readonly toolCalls: readonly AgentToolCall[];
  /** The resolved model, `provider:model`. */
  readonly model: string;
  /** Run time, a resumed checkpoint's included (not the time the process was down). */
  readonly elapsedMs: number;
  /** The limits the run ran under. */
  readonly budget: Readonly<Required<Pick<AgentBudget, 'maxSteps'>> & Omit<AgentBudget, 'maxSteps'>>;
  /**
   * The conversation after the run (without the system prompt): pass it as `messages` to continue. A call
   * interrupted without a result is still in it; the next run removes it before calling the model.
   */
  readonly messages: readonly ModelMessage[];
  /** What the last step that wrote any text wrote (a resumed checkpoint's steps included): the run's final answer; `text` holds every step's. */
  readonly finalText: string;
  /** The checkpoint's `steps`, when the run continued one (`resume`). */
  readonly resumedFrom?: number;
  /**
   * The question the run stopped to ask, or the call it waits to have approved (`finishReason: "input-required"`,
   * `askCaller` or `approvals` on): the run's last checkpoint holds the asking step, its ask unanswered; resume it
   * with the reply (`answerAsk`) to go on.
   */
  readonly asked?: AskedQuestion;
}

/** A tool call of the step under way, recorded right before its request went to the upstream (a call refused before that is not recorded). */
export interface InFlightToolCall {
  readonly toolCallId: string;
  /** Namespaced name, as the model called it. */
  readonly toolName: string;
  readonly input: unknown;
  /**
   * The result as the model reads it, once the call answered (`toModelOutput` of the result) or failed
   * (`error-text` with the error's message). Absent: the outcome is unknown — or the call waits for its approval.
   */
  readonly output?: ToolResultPart['output'];
  /**
   * A `klym__run_code` call's host calls that a resume may replay (tool calls and sub-calls, as they happened):
   * a program interrupted by a crash runs again from its start, these answered from the record.
   */
  readonly hostCalls?: readonly HostCallRecord[];
  /**
   * A call of a tool that needs the caller's approval, never sent until approved: `waiting` for the decision,
   * `approved` (a resumed run sends it). A denied call has the denial as its `output`.
   */
  readonly approval?: 'waiting' | 'approved';
}

/**
 * Where a run stands, saved after every step and around every tool call (`onCheckpoint`), so that it can
 * go on after the process died (`resume`). Plain JSON data: it survives `JSON.stringify` and `JSON.parse`.
 */
export interface AgentCheckpoint {
  /** Steps completed (model calls whose step ended). */
  readonly steps: number;
  /**
   * The conversation of the completed steps, prompt (and earlier `messages`) included, without the system
   * prompt; after a resume, the interrupted step's calls with their results too. Between two checkpoints
   * of one run, and from a `resume` checkpoint to the resumed run's, it only grows: a checkpoint's
   * `messages` starts with the previous one's (the same objects, within one process).
   */
  readonly messages: readonly ModelMessage[];
  /** Each completed step's text that was not empty, in order (and an interrupted step's, once resumed). */
  readonly texts: readonly string[];
  /** Summed over the completed steps. */
  readonly usage: AgentUsage;
  /** Run time so far (not counting time the process was down), in milliseconds: the time budget counts it. */
  readonly elapsedMs: number;
  /** Tool calls made by the completed steps (and an interrupted step's, once resumed). */
  readonly toolCalls: number;
  /**
   * In a checkpoint taken during a step (around a tool call): the step's number, the text it streamed so
   * far, and every call it sent so far, in order, each with its result once recorded.
   */
  readonly current?: { readonly step: number; readonly text: string; readonly calls: readonly InFlightToolCall[] };
}

/** When a checkpoint was taken, as `onCheckpoint`'s second argument. */
export interface CheckpointTaken {
  /**
   * Right before a tool call's request: the call waits for the listener (the Promise it returns), and is
   * not sent if it fails. Otherwise (after a step, after a call answered) nothing waits for it.
   */
  readonly beforeCall: boolean;
}

/** The `code` of a `tool-error` event: a {@link KlymErrorCode}, or a call the model made wrong. */
export type ToolErrorCode = KlymErrorCode | 'INVALID_TOOL_INPUT' | 'NO_SUCH_TOOL';

/** Options of {@link runAgent}. */
export interface RunAgentOptions {
  readonly pool: SessionPool;
  /**
   * The scope of `pool` the run's tool calls belong to (a task manager passes its task's). The caller who
   * opened it closes it. @default a scope of the run's own, closed when the run ends
   */
  readonly scope?: SessionScope;
  /** The task, as the user message. */
  readonly prompt: string;
  /**
   * Earlier conversation to continue (a run's `messages`). Tool calls in it that never got a result are
   * removed before the model is called. Not used with `resume`, whose conversation holds it. @default []
   */
  readonly messages?: readonly ModelMessage[];
  /** May hold `{{tools}}`, replaced by a description of the available tools. @default {@link DEFAULT_SYSTEM_PROMPT} */
  readonly systemPrompt?: string;
  /**
   * A model name (`openai:gpt-4.1-mini`, `google:gemini-2.5-flash`, `compatible:llama3`, a bare `gpt-…` or
   * `gemini-…`, or `scripted`), or an AI SDK language model (specification v4). @default 'scripted'
   */
  readonly model?: string | LanguageModel;
  /** Keys and base URLs of the providers a model name may need. */
  readonly providers?: ModelProviders;
  readonly temperature?: number;
  /** Which tools this run may call. */
  readonly tools?: ToolSelection;
  /** Rules per upstream (by name): allow/deny patterns over its own tool names, read-only tools, its probe. */
  readonly upstreamTools?: Readonly<Record<string, UpstreamToolRules>>;
  /** Named policies beyond the built-in `read-only`. */
  readonly policies?: Readonly<Record<string, ToolPolicy>>;
  /** Tools (namespaced patterns) that count as read-only besides those annotated `readOnlyHint`. */
  readonly readOnlyTools?: readonly string[];
  readonly budget?: AgentBudget;
  /** USD per million tokens, by model (`provider:model`), on top of {@link DEFAULT_MODEL_PRICES}. */
  readonly prices?: Readonly<Record<string, ModelPrice>>;
  /**
   * Context windows in tokens, by model (`provider:model`, or the model id alone), on top of
   * {@link DEFAULT_CONTEXT_WINDOWS}; a model in neither gets `CONTEXT_DEFAULTS.unknownModelWindow` (32,768). A
   * request that would not fit its model's window, less the room kept for the answer, is never sent: the run
   * fails with `CONTEXT_OVERFLOW`.
   */
  readonly contextWindows?: Readonly<Record<string, number>>;
  /** The provider's own retries of 408/409/429/5xx and network failures, with backoff and `retry-after`. @default 2 */
  readonly maxRetries?: number;
  /** Time limit of one tool call. @default the upstream's `timeouts.requestMs` */
  readonly toolTimeoutMs?: number;
  /**
   * Where the run keeps tool results too big to send (artifacts), read back with the built-in
   * `klym__read_artifact` and `klym__grep_artifact`. A task's run keeps them in its task store.
   * @default the run's memory
   */
  readonly artifacts?: ArtifactBackend;
  /** The model `klym__map_artifact` calls on each chunk (a name, as `model`). @default the run's model */
  readonly mapModel?: string;
  /** Limits of `klym__run_code`'s programs: memory, time, rows of a `sql()`. @default CODE_DEFAULTS */
  readonly code?: CodeLimits;
  /** `klym__map_artifact`'s model calls under way at once, at most. @default ARTIFACT_DEFAULTS.mapConcurrency (4) */
  readonly mapConcurrency?: number;
  /**
   * Tokens one `klym__map_artifact` call may send at most (system prompt, instruction and lines), whatever the
   * model's window; at most half the window still. @default ARTIFACT_DEFAULTS.mapChunkTokens (32,000)
   */
  readonly mapChunkTokens?: number;
  /**
   * A tool result of more tokens than this is kept as an artifact, and the model given a reference to it.
   * Counted like the model's requests (o200k_base for OpenAI's models, else the conservative estimate).
   * @default ARTIFACT_DEFAULTS.thresholdShare of the model's context window (`contextWindows`, else built in,
   * else 32,768): 104,757 tokens for gpt-4.1-mini, 12,800 for gpt-4o, 3,276 for a model Klym does not know
   */
  readonly artifactThresholdTokens?: number;
  /** Further secret values (tokens, …) to keep out of events and errors; provider keys and the pool's `secrets` are always kept out. */
  readonly secrets?: readonly string[];
  /**
   * Offer the model `klym__ask_caller { question }`. Calling it ends the run without an error once the step's
   * other calls are done, `finishReason: "input-required"` and the question in `asked`, its last checkpoint
   * (`onCheckpoint`, waited for) holding the ask unanswered: whoever can answer resumes the run from it with the
   * answer as the ask's result. A task manager turns it on for its tasks (`askCaller`). @default false
   */
  readonly askCaller?: boolean;
  /**
   * A call of a tool that needs approval (`tools.approval`, see {@link ToolSelection}) ends the run the same way,
   * `asked` being that call (`kind: "approval"`), until a decision resumes it: approved, the call is sent; denied,
   * the model reads so with the caller's reason. Off, such calls are refused (`TOOL_DENIED`). A task manager turns
   * it on for every task: the caller cannot turn a server's approvals off. @default false
   */
  readonly approvals?: boolean;
  /** Aborting it stops the model request and the tool calls in flight; the run resolves with `finishReason: "cancelled"`. */
  readonly signal?: AbortSignal;
  /**
   * Aborted, its reason a `{ name, limit, used }` of a budget kept outside the run (a task manager's daily
   * spend of the run's principal), when that budget is spent: the run ends before its next step or map call,
   * its partial text kept, as its own budgets end it (`finishReason: "budget:<name>"`, a `budget` event).
   */
  readonly budgetSignal?: AbortSignal;
  /**
   * Awaited before each step after the first, when given: the caller that keeps a budget elsewhere (a store
   * counting a principal's day) answers once it has counted the step before, so that `budgetSignal` is up to date.
   */
  readonly beforeStep?: () => Promise<void>;
  /** Receives every step of the run. A listener that throws does not stop the run. */
  readonly onEvent?: (event: AgentEvent) => void;
  /**
   * Receives the run's checkpoint after every step (after `step-end`), right before each tool call's
   * request goes to the upstream, and again when that call answers or fails — synchronously: a store that
   * returns has recorded the call, so a call whose result was never recorded is known, and never replayed
   * after a restart. A listener may instead return a Promise (a store on another thread or over the network): the call's
   * request then waits until it resolves. A listener that throws or rejects (a store that failed) does not
   * stop the run; before a call, that call fails unsent with `STORE_UNAVAILABLE`. The second argument,
   * which `runAgent` always passes, says which checkpoints a call waits for (`beforeCall`): a store
   * elsewhere can hurry those and take its time over the rest.
   */
  readonly onCheckpoint?: (checkpoint: AgentCheckpoint, taken?: CheckpointTaken) => void;
  /**
   * Continues a run from its checkpoint instead of starting with `prompt` (which is then not added
   * again): steps, usage, texts and run time carry over, so every budget counts what the checkpoint used
   * (a time budget already spent ends the run at once, `budget:time`). The calls of the step under way
   * are closed first: each reaches the model with its recorded result, or, without one, as a tool error
   * saying the call was interrupted by a restart and its outcome is unknown; none is ever sent again.
   * Then the run goes on with step `steps + 1` (the interrupted step's model call is not counted: its
   * usage was never recorded).
   * @throws {KlymError} `CONFIG_INVALID` for a checkpoint that is not one, naming the field.
   */
  readonly resume?: AgentCheckpoint;
  /**
   * Traces the run with OpenTelemetry: its span (`invoke_agent klym`, child of `tracing.parent` or the active
   * context), a span per step (`step <n>`), the AI SDK's own spans of each model call (`invoke_agent <model>` →
   * `chat <model>`, `execute_tool <tool>`), and a `tools/call <tool>` span per upstream call, whose W3C
   * context goes to the upstream in `params._meta`. Nesting the AI SDK's spans needs a context manager
   * registered with `@opentelemetry/api` (as an OpenTelemetry Node SDK does).
   * @default off: no span, the AI SDK's telemetry off, nothing added to a call's `_meta`
   */
  readonly tracing?: AgentTracing;
}

/** The options of a run that its caller wires rather than sets: live objects and listeners, never data. */
export type RunWiring = 'pool' | 'scope' | 'signal' | 'budgetSignal' | 'beforeStep' | 'onEvent' | 'onCheckpoint' | 'tracing' | 'model' | 'artifacts';

/**
 * What a run is set to, as data: {@link RunAgentOptions} without what its caller wires (the pool, scope,
 * signal, listeners, tracing), its model by name. A task's run defaults, and the options that cross to the
 * runner thread, are this one type narrowed, so a new option of `runAgent` reaches both without a list to edit.
 * One a task service gives every task as it is also needs its row in `RUN_SETTINGS` (`agent/run-settings.ts`),
 * whence the service's option and the server's config key: the compiler asks for it.
 */
export type RunSettings = Omit<RunAgentOptions, RunWiring> & { readonly model?: string };

/** What runs a task's agent: `runAgent` of `@klym/core`, or a stand-in with its contract. */
export type AgentRunner = ((options: RunAgentOptions) => Promise<AgentRunResult>) & {
  /**
   * The runner's events are already redacted with the run's `secrets` and provider keys, as `runAgent`'s
   * are (`createThreadRunner`'s are: they come from `runAgent` on its thread). The task manager then logs
   * them as they come instead of redacting each a second time. @default false (true for `runAgent` itself)
   */
  readonly redactsEvents?: boolean;
};
