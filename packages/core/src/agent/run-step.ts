import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { streamText, type ModelMessage, type ToolSet } from 'ai';
import { isKlymError } from '../errors.ts';
import type { ToolAccess } from '../tools/tool-policy.ts';
import { previewOf, resultText, toModelOutput, type ToolResultOutput } from '../tools/tool-result.ts';
import { interruptedStepMessages, type StreamedToolCall } from './history.ts';
import type { LanguageModelV4 } from './language-model.ts';
import type { AgentEvent, AgentToolCall, AgentUsage, ToolErrorCode } from './types.ts';
import { stepUsage, ZERO_USAGE } from './usage.ts';

type ProviderOptions = NonNullable<Parameters<typeof streamText>[0]['providerOptions']>;

/** What one step needs: the conversation so far and everything to call the model and the tools with. */
export interface StepInput {
  readonly step: number;
  readonly model: LanguageModelV4;
  readonly system: string;
  readonly messages: readonly ModelMessage[];
  readonly tools: ToolSet;
  /** How many tools the model is offered (denied ones are hidden from it). */
  readonly offeredTools: number;
  /** Characters of the tool definitions sent with each call, for estimating input tokens. */
  readonly toolDefinitionChars: number;
  readonly temperature: number | undefined;
  readonly maxRetries: number;
  readonly signal: AbortSignal;
  readonly providerOptions: ProviderOptions;
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
 * Runs one step: one streamed model call, and the tool calls it makes (executed by the AI SDK through
 * the catalog's tools). Emits `llm-request`, `tool-call`, `tool-result` / `tool-error` / `tool-denied`
 * and `llm-response`. Never throws: an abort or a model failure is in the outcome.
 */
export async function runStep(input: StepInput): Promise<StepOutcome> {
  const { step, emit } = input;
  let text = '';
  let reasoningChars = 0;
  let finishReason: string | undefined;
  let reported: Parameters<typeof stepUsage>[0];
  let aborted = false;
  let error: unknown;
  const streamed = new Map<string, StreamedToolCall & { readonly startedAt: number }>();
  const toolCalls: AgentToolCall[] = [];
  const durationOf = (id: string): number => Math.round(input.durations.get(id) ?? performance.now() - (streamed.get(id)?.startedAt ?? performance.now()));

  emit({ type: 'llm-request', step, messages: input.messages.length + 1, tools: input.offeredTools });
  const result = streamText({
    model: input.model,
    instructions: input.system,
    messages: [...input.messages],
    tools: input.tools,
    toolChoice: 'auto',
    maxRetries: input.maxRetries,
    abortSignal: input.signal,
    providerOptions: input.providerOptions,
    ...(input.temperature === undefined ? {} : { temperature: input.temperature }),
    // Errors arrive as stream parts; without this the SDK would print them to the console.
    onError: () => {},
  });

  try {
    for await (const part of result.fullStream) {
      switch (part.type) {
        case 'text-delta':
          text += part.text;
          input.progress?.text(part.text);
          break;
        case 'reasoning-delta':
          reasoningChars += part.text.length;
          break;
        case 'tool-call':
          streamed.set(part.toolCallId, { toolCallId: part.toolCallId, toolName: part.toolName, input: part.input, startedAt: performance.now() });
          emit({ type: 'tool-call', step, toolCallId: part.toolCallId, toolName: part.toolName, args: part.input });
          break;
        case 'tool-result': {
          const output = part.output as CallToolResult;
          const preview = previewOf(resultText(output));
          const isError = output.isError === true;
          const durationMs = durationOf(part.toolCallId);
          const modelOutput = toModelOutput(output);
          const call = streamed.get(part.toolCallId);
          if (call !== undefined) call.output = modelOutput;
          input.progress?.answered(part.toolCallId, modelOutput);
          emit({ type: 'tool-result', step, toolCallId: part.toolCallId, toolName: part.toolName, durationMs, isError, preview });
          toolCalls.push({ step, toolCallId: part.toolCallId, toolName: part.toolName, args: part.input, ok: !isError, durationMs, ...(isError ? { error: preview } : {}) });
          break;
        }
        case 'tool-error': {
          const { code, message } = classifyToolError(part.error);
          const durationMs = durationOf(part.toolCallId);
          const modelOutput: ToolResultOutput = { type: 'error-text', value: message };
          const call = streamed.get(part.toolCallId);
          if (call !== undefined) call.output = modelOutput;
          input.progress?.answered(part.toolCallId, modelOutput);
          const access = input.accessOf(part.toolName);
          if (code === 'TOOL_DENIED' && access !== undefined && !access.allowed) {
            emit({ type: 'tool-denied', step, toolCallId: part.toolCallId, toolName: part.toolName, policy: access.policy, reason: access.reason });
          }
          emit({ type: 'tool-error', step, toolCallId: part.toolCallId, toolName: part.toolName, durationMs, code, message });
          toolCalls.push({ step, toolCallId: part.toolCallId, toolName: part.toolName, args: part.input, ok: false, durationMs, error: message });
          break;
        }
        case 'finish-step':
          finishReason = part.finishReason;
          reported = part.usage;
          break;
        case 'error':
          error ??= part.error;
          break;
        case 'abort':
          aborted = true;
          break;
        default:
          break;
      }
    }
  } catch (thrown) {
    if (input.signal.aborted) aborted = true;
    else error ??= thrown;
  }
  if (input.signal.aborted) aborted = true;

  const calls = [...streamed.values()];
  const outputChars = text.length + reasoningChars + calls.reduce((sum, call) => sum + JSON.stringify(call.input ?? {}).length, 0);
  const inputChars = input.system.length + JSON.stringify(input.messages).length + input.toolDefinitionChars;
  // A request the provider refused produced nothing to bill; an interrupted one may have: estimate it.
  const refused = error !== undefined && reported === undefined && outputChars === 0;
  const usage = refused ? ZERO_USAGE : stepUsage(reported, { input: inputChars, output: outputChars });
  if (finishReason !== undefined) emit({ type: 'llm-response', step, finishReason, usage, text });

  let messages: readonly ModelMessage[];
  try {
    messages = aborted || error !== undefined ? interruptedStepMessages(text, calls) : (await result.response).messages;
  } catch {
    messages = interruptedStepMessages(text, calls);
  }
  if (finishReason === 'error' && error === undefined) error = new Error('the model stream ended with an error');
  const continues = !aborted && error === undefined && calls.length > 0 && calls.every((call) => call.output !== undefined);
  return { text, finishReason, usage, messages, toolCalls, aborted, error, continues };
}

/** A tool error's code and message: Klym's own code, or what the model did wrong (unknown tool, bad arguments). */
function classifyToolError(error: unknown): { code: ToolErrorCode; message: string } {
  if (isKlymError(error)) return { code: error.code, message: error.message };
  const name = error instanceof Error ? error.name : '';
  const message = error instanceof Error ? error.message : String(error);
  if (name === 'AI_NoSuchToolError' || message.startsWith('AI_NoSuchToolError')) return { code: 'NO_SUCH_TOOL', message: message.replace(/^AI_NoSuchToolError:\s*/, '') };
  if (name === 'AI_InvalidToolInputError' || message.startsWith('AI_InvalidToolInputError')) {
    return { code: 'INVALID_TOOL_INPUT', message: message.replace(/^AI_InvalidToolInputError:\s*/, '') };
  }
  return { code: 'INTERNAL', message };
}
