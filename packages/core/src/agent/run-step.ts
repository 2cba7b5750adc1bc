import type { CallToolResult } from '@modelcontextprotocol/client';
import type { ModelMessage, TelemetryOptions, ToolSet } from 'ai';
import type { ToolAccess } from '../tools/tool-policy.ts';
import type { ToolResultOutput } from '../tools/tool-result.ts';
import { generateStep } from './generate-step.ts';
import type { LanguageModelV4 } from './language-model.ts';
import { createStepRecord, type ProviderOptions } from './step-record.ts';
import { streamStep } from './stream-step.ts';
import type { AgentToolCall, AgentUsage } from './types.ts';
import type { AgentEvent } from './agent-event.ts';

/** What one step needs: the conversation so far and everything to call the model and the tools with. */
export interface StepInput {
  readonly step: number;
  readonly model: LanguageModelV4;
  /**
   * Stream the model call (real providers: a step cut off keeps its partial text), or make it in one
   * `generateText` call (the scripted model, which gains nothing from a stream). @default true
   */
  readonly streams?: boolean;
  readonly system: string;
  readonly messages: readonly ModelMessage[];
  readonly tools: ToolSet;
  /** How many tools the model is offered (denied ones are hidden from it). */
  readonly offeredTools: number;
  /** The request's input tokens as the run's context window counts them, for `llm-request`; absent for a model without a window. */
  readonly requestTokens?: number;
  /** Characters of the tool definitions sent with each call, for estimating input tokens. */
  readonly toolDefinitionChars: number;
  /**
   * The length of `messages` as JSON, for estimating input tokens when the provider reports none; a run
   * passes one that remembers each message's. @default `JSON.stringify(messages).length`
   */
  readonly messageChars?: (messages: readonly ModelMessage[]) => number;
  /** A tool result's text, for its event and the checkpoints; a run passes one that remembers each result's. @default `resultText` */
  readonly resultText?: (result: CallToolResult) => string;
  readonly temperature: number | undefined;
  readonly maxRetries: number;
  readonly signal: AbortSignal;
  readonly providerOptions: ProviderOptions;
  /** The AI SDK's telemetry, for a traced run. @default off (`{ isEnabled: false }`) */
  readonly telemetry?: TelemetryOptions;
  /** Tool durations measured around the upstream call, by tool call id. */
  readonly durations: ReadonlyMap<string, number>;
  readonly accessOf: (toolName: string) => ToolAccess | undefined;
  readonly emit: (event: AgentEvent) => void;
  /** Told of the step's progress as it streams, for the run's checkpoints. */
  readonly progress?: StepProgress;
}

/** What a step reports while it runs: the text streamed, and each call's result as the model will read it. */
export interface StepProgress {
  text(delta: string): void;
  answered(toolCallId: string, output: ToolResultOutput): void;
}

/** How one step went. */
export interface StepOutcome {
  /** What the model wrote in this step (so far, if interrupted). */
  readonly text: string;
  /** The model's finish reason, when the step finished. */
  readonly finishReason: string | undefined;
  readonly usage: AgentUsage;
  /** The step's assistant and tool messages. */
  readonly messages: readonly ModelMessage[];
  readonly toolCalls: readonly AgentToolCall[];
  /** The run's signal aborted during the step. */
  readonly aborted: boolean;
  /** The model failed (after the provider's retries). */
  readonly error: unknown;
  /** The model called tools and every call has a result: the loop goes on. */
  readonly continues: boolean;
}

/**
 * Runs one step: one model call, streamed or not (`streams`), and the tool calls it makes (executed by
 * the AI SDK through the catalog's tools). Both ways emit the same events in the same order —
 * `llm-request`, `tool-call`, `tool-result` / `tool-error` / `tool-denied`, `llm-response` — and report
 * the same progress. Never throws: an abort or a model failure is in the outcome.
 */
export async function runStep(input: StepInput): Promise<StepOutcome> {
  const tokens = input.requestTokens === undefined ? {} : { tokens: input.requestTokens };
  input.emit({ type: 'llm-request', step: input.step, messages: input.messages.length + 1, tools: input.offeredTools, ...tokens });
  const record = createStepRecord(input);
  const ending = input.streams === false ? await generateStep(input, record) : await streamStep(input, record);
  return record.finish(ending);
}
