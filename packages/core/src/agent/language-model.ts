import type { LanguageModel } from 'ai';

/** An AI SDK language model of specification v4, the version this SDK's providers implement. */
export type LanguageModelV4 = Extract<LanguageModel, { readonly specificationVersion: 'v4' }>;

/** What a v4 model is called with: the prompt, the tools offered, settings, the abort signal, provider options. */
export type LanguageModelCallOptions = Parameters<LanguageModelV4['doStream']>[0];

/** One part of a v4 model's stream. */
export type LanguageModelStreamPart = Awaited<ReturnType<LanguageModelV4['doStream']>>['stream'] extends ReadableStream<infer Part> ? Part : never;

/**
 * Marks a model that gains nothing from streaming (Klym's scripted model): set to `false`, its steps run
 * with one `generateText` call instead of a stream. A registered symbol, so that a model made by another
 * copy of `@klym/core` (its built `dist/` beside its sources) is recognised too.
 */
export const STREAMS = Symbol.for('klym.model.streams');

/** Whether `model` should be streamed: every model unless it is marked otherwise ({@link STREAMS}). */
export function streamsModel(model: LanguageModelV4): boolean {
  return (model as { readonly [STREAMS]?: boolean })[STREAMS] !== false;
}

/** One message of a v4 model's prompt. */
export type LanguageModelPromptMessage = LanguageModelCallOptions['prompt'][number];

/** One answer of a scripted model: text, tool calls, or both. */
export interface ScriptedStep {
  readonly text?: string;
  /** Calls to make; `args` is sent as the call's JSON input. */
  readonly toolCalls?: readonly { readonly toolCallId?: string; readonly toolName: string; readonly args?: unknown }[];
  /** @default 'tool-calls' when there are tool calls, else 'stop' */
  readonly finishReason?: 'stop' | 'length' | 'content-filter' | 'tool-calls' | 'other';
  /** Token counts to report; without them the model reports none, and the run estimates them. */
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number };
}

/**
 * `model`, offering the provider only the tools named in `visible`. The AI SDK still knows every tool, so a
 * call to a hidden one reaches its `execute` (which refuses it, naming the policy) instead of failing as
 * an unknown tool.
 */
export function withVisibleTools(model: LanguageModelV4, visible: ReadonlySet<string>): LanguageModelV4 {
  const filter = (options: LanguageModelCallOptions): LanguageModelCallOptions => ({
    ...options,
    ...(options.tools === undefined ? {} : { tools: options.tools.filter((tool) => tool.type !== 'function' || visible.has(tool.name)) }),
  });
  return {
    specificationVersion: 'v4',
    provider: model.provider,
    modelId: model.modelId,
    get supportedUrls() {
      return model.supportedUrls;
    },
    doGenerate: (options) => model.doGenerate(filter(options)),
    doStream: (options) => model.doStream(filter(options)),
  };
}
