import type { CallToolResult } from '@modelcontextprotocol/client';
import type { LanguageModelUsage, ModelMessage, streamText } from 'ai';
import { isKlymError } from '../errors.ts';
import { previewOf, resultText, toModelOutput, type ToolResultOutput } from '../tools/tool-result.ts';
import { interruptedStepMessages, type StreamedToolCall } from './history.ts';
import type { StepInput, StepOutcome } from './run-step.ts';
import type { AgentToolCall, ToolErrorCode } from './types.ts';
import { stepUsage, ZERO_USAGE } from './usage.ts';

/** What a step passes to the model as `providerOptions`. */
export type ProviderOptions = NonNullable<Parameters<typeof streamText>[0]['providerOptions']>;

/**
 * The AI SDK's telemetry, off. On (its default), every model call and tool execution builds copies of its
 * event for integrations and the `ai:telemetry` tracing channel even when nothing is registered or
 * subscribed; Klym reports each step through its own events instead.
 */
export const TELEMETRY_OFF = { isEnabled: false } as const;

/** The settings of a step's model call that do not depend on how it is made. */
type ModelCall = Pick<
  Parameters<typeof streamText>[0],
  'model' | 'instructions' | 'tools' | 'toolChoice' | 'maxRetries' | 'abortSignal' | 'providerOptions' | 'temperature' | 'telemetry'
> & { messages: ModelMessage[] };

/** A step's model call as both ways of making it (`streamText`, `generateText`) take it: one place for the settings. */
export function modelCallOf(input: StepInput): ModelCall {
  return {
    model: input.model,
    instructions: input.system,
    // The SDK only reads the conversation; a copy would cost one per step.
    messages: input.messages as ModelMessage[],
    tools: input.tools,
    toolChoice: 'auto' as const,
    maxRetries: input.maxRetries,
    abortSignal: input.signal,
    providerOptions: input.providerOptions,
    ...(input.temperature === undefined ? {} : { temperature: input.temperature }),
    telemetry: input.telemetry ?? TELEMETRY_OFF,
  };
}

/** How a step's model call ended, as the streamed or the one-call way saw it. */
export interface StepEnding {
  readonly finishReason: string | undefined;
  /** The usage the provider reported for the step. */
  readonly reported: LanguageModelUsage | undefined;
  readonly aborted: boolean;
  readonly error: unknown;
  /** The SDK's messages of a step that finished; not asked for after an abort or a failure. */
  readonly messages?: () => readonly ModelMessage[] | Promise<readonly ModelMessage[]>;
}

/**
 * What one step did, fed by either way of calling the model: the text, each tool call and its outcome.
 * It emits the calls' events as they come, reports the progress, and makes the step's outcome.
 */
export interface StepRecord {
  text(delta: string): void;
  reasoning(chars: number): void;
  /** The model called a tool: `tool-call`. */
  call(toolCallId: string, toolName: string, args: unknown): void;
  /** The tool answered (an `isError` result included): `tool-result`. */
  result(toolCallId: string, toolName: string, args: unknown, output: CallToolResult): void;
  /** The call failed (thrown, denied, unknown tool, bad arguments): `tool-denied`?, `tool-error`. */
  failure(toolCallId: string, toolName: string, args: unknown, error: unknown): void;
  /** Emits `llm-response` when the model finished, and makes the step's outcome. */
  finish(ending: StepEnding): Promise<StepOutcome>;
}

/** The step's record; `input` gives the step number, the events' listener, the progress and the durations. */
export function createStepRecord(input: StepInput): StepRecord {
  const { step, emit } = input;
  let text = '';
  let reasoningChars = 0;
  const calls = new Map<string, StreamedToolCall & { readonly startedAt: number }>();
  const toolCalls: AgentToolCall[] = [];
  const durationOf = (id: string): number => Math.round(input.durations.get(id) ?? performance.now() - (calls.get(id)?.startedAt ?? performance.now()));
  const answered = (toolCallId: string, output: ToolResultOutput): void => {
    const call = calls.get(toolCallId);
    if (call !== undefined) call.output = output;
    input.progress?.answered(toolCallId, output);
  };

  return {
    text(delta) {
      text += delta;
      input.progress?.text(delta);
    },
    reasoning(chars) {
      reasoningChars += chars;
    },
    call(toolCallId, toolName, args) {
      calls.set(toolCallId, { toolCallId, toolName, input: args, startedAt: performance.now() });
      emit({ type: 'tool-call', step, toolCallId, toolName, args });
    },
    result(toolCallId, toolName, args, output) {
      const outputText = (input.resultText ?? resultText)(output);
      const preview = previewOf(outputText);
      const isError = output.isError === true;
      const durationMs = durationOf(toolCallId);
      answered(toolCallId, toModelOutput(output, outputText));
      emit({ type: 'tool-result', step, toolCallId, toolName, durationMs, isError, preview });
      toolCalls.push({ step, toolCallId, toolName, args, ok: !isError, durationMs, ...(isError ? { error: preview } : {}) });
    },
    failure(toolCallId, toolName, args, error) {
      const { code, message } = classifyToolError(error);
      const durationMs = durationOf(toolCallId);
      answered(toolCallId, { type: 'error-text', value: message });
      const access = input.accessOf(toolName);
      if (code === 'TOOL_DENIED' && access !== undefined && !access.allowed) {
        emit({ type: 'tool-denied', step, toolCallId, toolName, policy: access.policy, reason: access.reason });
      }
      emit({ type: 'tool-error', step, toolCallId, toolName, durationMs, code, message });
      toolCalls.push({ step, toolCallId, toolName, args, ok: false, durationMs, error: message });
    },
    async finish(ending) {
      const { finishReason, reported } = ending;
      const aborted = ending.aborted || input.signal.aborted;
      let error = ending.error;
      const made = [...calls.values()];
      // A request the provider refused produced nothing to bill; an interrupted one may have: estimate it.
      const refused = error !== undefined && reported === undefined && text.length + reasoningChars === 0 && made.length === 0;
      // Characters are counted only for what the provider did not report: counting means serialising.
      const usage = refused
        ? ZERO_USAGE
        : stepUsage(reported, {
            input: reported?.inputTokens === undefined ? inputChars(input) : 0,
            output:
              reported?.outputTokens === undefined
                ? text.length + reasoningChars + made.reduce((sum, call) => sum + JSON.stringify(call.input ?? {}).length, 0)
                : 0,
          });
      if (finishReason !== undefined) emit({ type: 'llm-response', step, finishReason, usage, text });

      let messages: readonly ModelMessage[];
      try {
        messages = aborted || error !== undefined || ending.messages === undefined ? interruptedStepMessages(text, made) : await ending.messages();
      } catch {
        messages = interruptedStepMessages(text, made);
      }
      if (finishReason === 'error' && error === undefined) error = new Error('the model stream ended with an error');
      const continues = !aborted && error === undefined && made.length > 0 && made.every((call) => call.output !== undefined);
      return { text, finishReason, usage, messages, toolCalls, aborted, error, continues };
    },
  };
}

function inputChars(input: StepInput): number {
  const messages = input.messageChars === undefined ? JSON.stringify(input.messages).length : input.messageChars(input.messages);
  return input.system.length + messages + input.toolDefinitionChars;
}

/** An error as the AI SDK words it for a call it refused itself (its `getErrorMessage`): `Name: message`. */
export function errorText(error: unknown): string {
  if (error === null || error === undefined) return 'unknown error';
  if (typeof error === 'string') return error;
  if (error instanceof Error) return error.toString();
  return JSON.stringify(error);
}

/** A tool error's code and message: Klym's own code, or what the model did wrong (unknown tool, bad arguments). */
function classifyToolError(error: unknown): { code: ToolErrorCode; message: string } {
  if (isKlymError(error)) return { code: error.code, message: error.message };
  const name = error instanceof Error ? error.name : '';
  const message = error instanceof Error ? error.message : String(error);
  if (name === 'AI_NoSuchToolError' || message.startsWith('AI_NoSuchToolError'))
    return { code: 'NO_SUCH_TOOL', message: message.replace(/^AI_NoSuchToolError:\s*/, '') };
  if (name === 'AI_InvalidToolInputError' || message.startsWith('AI_InvalidToolInputError')) {
    return { code: 'INVALID_TOOL_INPUT', message: message.replace(/^AI_InvalidToolInputError:\s*/, '') };
  }
  return { code: 'INTERNAL', message };
}
