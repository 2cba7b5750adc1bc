// A run's set-up before its first step: options checked, the tools and the model that sees them, window, compaction.
import type { CallToolResult } from '@modelcontextprotocol/client';
import type { ModelMessage, ToolSet } from 'ai';
import { KlymError } from '../errors.ts';
import type { SessionScope } from '../pool/session-scope.ts';
import type { ToolCatalog } from '../tools/tool-catalog.ts';
import type { ToolAccess } from '../tools/tool-policy.ts';
import { createResultTexts } from '../tools/tool-result.ts';
import type { RunTracing } from './agent-tracing.ts';
import type { AgentEvent } from './agent-event.ts';
import { askCallerTools } from './ask-caller.ts';
import { approvedCalls, offeredTools } from './approvals.ts';
import { createBudgetHolds, describeBudgetHit, outsideBudget, spentBudget, type BudgetHolds, type ResolvedBudget } from './budget.ts';
import { assertCheckpoint, type Checkpointer } from './checkpoint.ts';
import { artifactThreshold, contextWindowOf, createContextWindow, type ContextWindow } from './context-window.ts';
import { withVisibleTools, type LanguageModelV4 } from './language-model.ts';
import { resolveModel, type ResolvedModel } from './model-resolver.ts';
import type { RunContext } from './self-check.ts';
import type { ProviderOptions } from './step-record.ts';
import { DEFAULT_SYSTEM_PROMPT, renderSystemPrompt } from './system-prompt.ts';
import { createMessagesCounter, createTokenCounter } from './token-count.ts';
import type { AgentUsage, ModelPrice, RunAgentOptions } from './types.ts';
import { costOf, createMessageSizer } from './usage.ts';
import { ARTIFACT_DEFAULTS, DEFAULT_MAX_RETRIES } from '../defaults.ts';
import type { ArtifactQuery } from '../artifacts/artifact-query.ts';
import { createArtifactStore, createMemoryArtifacts } from '../artifacts/artifact-store.ts';
import type { ArtifactBackend } from '../artifacts/artifact-types.ts';
import { artifactTools } from '../artifacts/artifact-tools.ts';
import { keepBigResult, type ResultKeeping } from '../artifacts/result-keeping.ts';
import type { Compaction } from '../artifacts/compaction.ts';
import { CODE_TOOL_NAME, codeTool, type CodeRunning } from '../code/code-tool.ts';
import { positiveInteger } from '../internal/positive.ts';

/** What {@link setUpRun} builds on: the run's options, model, catalog and budget, and its hooks into the loop's state. */
export interface RunSetupInput {
  readonly options: RunAgentOptions;
  readonly resolved: ResolvedModel;
  readonly catalog: ToolCatalog;
  readonly budget: ResolvedBudget;
  readonly price: ModelPrice | undefined;
  readonly scope: SessionScope;
  readonly signal: AbortSignal;
  readonly checkpoints: Checkpointer;
  readonly tracing: RunTracing | undefined;
  readonly emit: (event: AgentEvent) => void;
  /** The step under way, for the events its tools send. */
  readonly currentStep: () => number;
  /** The run's usage so far, and how a map's calls add to it. */
  readonly usage: () => AgentUsage;
  readonly addUsage: (used: AgentUsage) => void;
  /** The run's own DuckDB, for artifacts whose backend has none: opened at the first query, closed by the run. */
  readonly ownQuery: (backend: ArtifactBackend) => ArtifactQuery;
}

/** What the step loop is given: the tools, offered and all, the model that sees them, the window and what each step shares. */
export interface RunSetup {
  /** Every tool the run can call: the catalog's and the built-ins. */
  readonly tools: ToolSet;
  /** `tools` as the model is offered them: a call that needs approval parks the run. */
  readonly offered: ToolSet;
  readonly builtIns: ToolSet;
  readonly coding: CodeRunning;
  readonly visibleModel: LanguageModelV4;
  readonly system: string;
  readonly contextWindow: ContextWindow;
  readonly compaction: Compaction;
  readonly toolDefinitionChars: number;
  readonly messageChars: (messages: readonly ModelMessage[]) => number;
  readonly resultText: (result: CallToolResult) => string;
  readonly providerOptions: ProviderOptions;
  readonly durations: Map<string, number>;
  readonly accessOf: (toolName: string) => ToolAccess | undefined;
  readonly approvalTools: ReadonlySet<string>;
  readonly needsApproval: (toolName: string) => boolean;
  readonly holds: BudgetHolds;
}

/**
 * Builds what a run's steps share from its catalog: the tools (the pool's with the run's hooks, the artifacts',
 * code, asking the caller), the model that sees only the allowed ones, the system prompt, the context window
 * and the compaction measured against it.
 */
export async function setUpRun(input: RunSetupInput): Promise<RunSetup> {
  const { options, catalog, budget, price, scope, signal, emit, checkpoints, tracing, currentStep, usage, ownQuery } = input;
  const { model, name, streams } = input.resolved;
  const access = new Map(catalog.tools.map((tool) => [tool.name, tool.access]));
  // Calls of tools that need approval park the run (a task's); without a caller to ask, they are refused.
  const approvalTools = new Set(options.approvals === true ? catalog.tools.flatMap((tool) => (tool.approval === undefined ? [] : [tool.name])) : []);
  const needsApproval = (toolName: string): boolean => approvalTools.has(toolName);
  const approved = approvedCalls(options.resume);
  const durations = new Map<string, number>();
  const holds = createBudgetHolds(budget, price, usage);
  const counter = await createTokenCounter(name);
  // The map's model counts with its own tokenizer.
  const mapper = options.mapModel === undefined ? { model, streams, name } : resolveModel(options.mapModel, options.providers);
  const mapCounter = mapper.name === name ? counter : await createTokenCounter(mapper.name);
  // A result's text is asked for four times (the artifact check, the model's output, the event, the checkpoint): made once.
  const resultText = createResultTexts();
  const thresholdTokens = options.artifactThresholdTokens ?? artifactThreshold(name, options.contextWindows);
  // A page the model reads stays under the threshold, so reading one never makes another artifact.
  const pageTokens = Math.max(MIN_PAGE_TOKENS, Math.floor(thresholdTokens * PAGE_SHARE));
  const backend = options.artifacts ?? createMemoryArtifacts();
  const keeping: ResultKeeping = {
    artifacts: createArtifactStore({ countTokens: counter.count, backend, pageTokens }),
    thresholdTokens,
    pageTokens,
    countTokens: counter.count,
    tokenizer: counter.tokenizer,
    resultText,
    onKept: (artifact, head) => emit({ type: 'artifact-kept', step: currentStep(), artifact, head }),
    // A task's store queries in the task's DuckDB; a run without one opens its own at its first query.
    query: { query: (sql, queryOptions) => (backend.query === undefined ? ownQuery(backend).query(sql, queryOptions) : backend.query(sql, queryOptions)) },
    onQueried: ({ sql, answer, kept }) =>
      emit({
        type: 'artifact-query',
        step: currentStep(),
        sql,
        rows: answer.rowCount,
        columns: answer.columns.length,
        tables: answer.tables,
        elapsedMs: answer.elapsedMs,
        ...(kept === undefined ? {} : { kept: kept.id }),
      }),
    mapping: {
      model: mapper.model,
      streams: mapper.streams,
      windowTokens: workingWindow(contextWindowOf(mapper.name, options.contextWindows).tokens),
      chunkTokens: options.mapChunkTokens ?? ARTIFACT_DEFAULTS.mapChunkTokens,
      concurrency: options.mapConcurrency ?? ARTIFACT_DEFAULTS.mapConcurrency,
      countTokens: mapCounter.count,
      maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      signal,
      // A map spends within the run's budgets: each call holds its most before it is sent, and counts as it ends (a failed map's too).
      reserve: (most) => {
        const outside = outsideBudget(options.budgetSignal);
        return outside === undefined ? holds.hold(most) : { reason: describeBudgetHit(outside) };
      },
      onUsage: (used) => {
        input.addUsage(used);
      },
    },
    // The map's usage is in the run's already (`onUsage`): the event tells the task's status.
    onMapped: ({ artifact, chunks, usage: used }) => emit({ type: 'artifact-map', step: currentStep(), artifact, chunks, usage: used }),
  };
  const readOnly = new Set(catalog.tools.flatMap((tool) => (tool.readOnly ? [tool.name] : [])));
  const coding: CodeRunning = {
    ...(options.code === undefined ? {} : { limits: options.code }),
    tools: catalog.toolSet({
      scope,
      ...(options.toolTimeoutMs === undefined ? {} : { timeoutMs: options.toolTimeoutMs }),
      onLog: (entry) => emit({ type: 'upstream-log', step: currentStep(), entry }),
      resultText,
      ...(tracing === undefined ? {} : { tracing: tracing.toolCalls }),
    }),
    keeping,
    onEvent: (event) => emit({ ...event, step: currentStep() }),
    readOnly: (toolName) => readOnly.has(toolName),
    // A program's calls and sub-calls stop at a spent budget, as the run's steps do.
    budgetSpent: () => {
      const hit = spentBudget(budget, usage(), costOf(usage(), price)) ?? outsideBudget(options.budgetSignal) ?? holds.refused();
      return hit === undefined ? undefined : describeBudgetHit(hit);
    },
    recorder: {
      started: (toolCallId, code) => checkpoints.sent({ toolCallId, toolName: CODE_TOOL_NAME, input: { code } }),
      hostCall: (toolCallId, record, when) => checkpoints.hostCall(toolCallId, record, when),
    },
  };
  const builtIns = {
    ...artifactTools(keeping),
    ...(options.askCaller === true ? askCallerTools() : {}),
    // A program's calls take the model's path (rules, policies, the scope, logs), but its results reach the program, kept by it.
    [CODE_TOOL_NAME]: codeTool(coding),
  };
  const messageChars = createMessageSizer();
  const tools = {
    ...catalog.toolSet({
      scope,
      ...(options.toolTimeoutMs === undefined ? {} : { timeoutMs: options.toolTimeoutMs }),
      onLog: (entry) => emit({ type: 'upstream-log', step: currentStep(), entry }),
      onDuration: (toolCallId, durationMs) => durations.set(toolCallId, durationMs),
      onRequest: (call) => checkpoints.sent(call),
      approved: (toolCallId) => approved.has(toolCallId),
      keep: (toolName, result) => keepBigResult(toolName, result, keeping),
      resultText,
      ...(tracing === undefined ? {} : { tracing: tracing.toolCalls }),
    }),
    ...builtIns,
  };
  const offered = approvalTools.size === 0 ? tools : offeredTools(tools, needsApproval);
  const visible = new Set([...catalog.allowed.map((tool) => tool.name), ...Object.keys(builtIns)]);
  const visibleModel = withVisibleTools(model, visible);
  const system = renderSystemPrompt(options.systemPrompt ?? DEFAULT_SYSTEM_PROMPT, catalog.describe());
  const contextWindow = createContextWindow({
    model: name,
    contextWindows: options.contextWindows,
    counter,
    system,
    tools,
    visible: (toolName) => visible.has(toolName),
  });
  // Compacted against the whole request as the window counts it: the system prompt and the tools included.
  const compaction: Compaction = {
    budgetTokens: Math.floor(ARTIFACT_DEFAULTS.compactShare * workingWindow(contextWindow.window)),
    keepSteps: ARTIFACT_DEFAULTS.compactKeepSteps,
    // The scripted model has no window, so its requests count nothing there: its messages are counted as they are.
    measure: Number.isFinite(contextWindow.window) ? (kept) => contextWindow.requestTokens(kept) : createMessagesCounter(counter.count),
    keep: (toolName, text) => keeping.artifacts.put(toolName, text),
  };
  const context: RunContext = { upstreams: catalog.upstreams, probes: catalog.probes };
  const toolDefinitionChars = catalog.definitionChars();
  const providerOptions = { klym: context as unknown as Record<string, never> };
  const accessOf = (toolName: string) => access.get(toolName);
  return {
    tools,
    offered,
    builtIns,
    coding,
    visibleModel,
    system,
    contextWindow,
    compaction,
    toolDefinitionChars,
    messageChars,
    resultText,
    providerOptions,
    durations,
    accessOf,
    approvalTools,
    needsApproval,
    holds,
  };
}

/** A page the model reads, as a share of the artifact threshold, and at least this many tokens. */
const PAGE_SHARE = 0.75;
const MIN_PAGE_TOKENS = 100;

/** A window to size chunks and compactions by: the model's, or for the scripted model, which has none, `ARTIFACT_DEFAULTS.contextWindow`. */
function workingWindow(tokens: number): number {
  return Number.isFinite(tokens) ? tokens : ARTIFACT_DEFAULTS.contextWindow;
}

function invalid(message: string): never {
  throw new KlymError('CONFIG_INVALID', message);
}

/** Checks a run's options before anything starts. @throws {KlymError} `CONFIG_INVALID`, naming the option and what it got. */
export function checkOptions(options: RunAgentOptions): void {
  if (options.pool === undefined || typeof options.pool.listTools !== 'function') invalid('Expected `pool` to be a session pool');
  if (typeof options.prompt !== 'string') invalid(`Expected \`prompt\` to be a string, got ${typeof options.prompt}`);
  if (options.temperature !== undefined && !Number.isFinite(options.temperature))
    invalid(`Expected \`temperature\` to be a number, got ${String(options.temperature)}`);
  if (options.maxRetries !== undefined && (!Number.isInteger(options.maxRetries) || options.maxRetries < 0)) {
    invalid(`Expected \`maxRetries\` to be an integer ≥ 0, got ${String(options.maxRetries)}`);
  }
  for (const name of ['mapConcurrency', 'mapChunkTokens', 'artifactThresholdTokens'] as const) {
    const value = options[name];
    if (value !== undefined) positiveInteger(name, value);
  }
  if (options.toolTimeoutMs !== undefined) positiveInteger('toolTimeoutMs', options.toolTimeoutMs);
  if (options.messages?.some((message) => message.role === 'system')) invalid('Expected `messages` without system messages; pass `systemPrompt` instead');
  if (options.onCheckpoint !== undefined && typeof options.onCheckpoint !== 'function')
    invalid(`Expected \`onCheckpoint\` to be a function, got ${typeof options.onCheckpoint}`);
  for (const [model, tokens] of Object.entries(options.contextWindows ?? {})) positiveInteger(`contextWindows[${JSON.stringify(model)}]`, tokens);
  if (options.resume !== undefined) assertCheckpoint(options.resume);
}
