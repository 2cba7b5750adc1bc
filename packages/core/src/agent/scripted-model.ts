import { STREAMS, type LanguageModelCallOptions, type LanguageModelStreamPart, type LanguageModelV4, type ScriptedStep } from './language-model.ts';
import { selfCheckStep } from './self-check.ts';

export type { ScriptedStep };

/** What a scripted step function is told about the call it answers. */
export interface ScriptedCall {
  /** 1 for the model's first call, counting every call this model instance answered. */
  readonly call: number;
  /** The full call: prompt, tools offered, settings, abort signal, `providerOptions.klym`. */
  readonly options: LanguageModelCallOptions;
}

/** Options of {@link createScriptedModel}. */
export interface ScriptedModelOptions {
  /**
   * The answers: the n-th call gets `steps[n - 1]` (a call past the end fails), or a function deciding each
   * answer. @default the self-check script (see `SELF_CHECK_OK`)
   */
  readonly steps?: readonly ScriptedStep[] | ((call: ScriptedCall) => ScriptedStep | Promise<ScriptedStep>);
  /** Wait before answering (before each part, when streamed), in milliseconds; an abort ends the wait. @default 0 */
  readonly delayMs?: number;
  /** @default 'self-check' with the default script, else 'script' */
  readonly modelId?: string;
}

/**
 * An offline language model: no key, no network. It is an AI SDK v4 model, so it runs through the same
 * loop, budgets and events as a real one. By default it performs the self-check: it calls one read-only
 * probe per upstream and reports whether everything works. It reports no token usage, so runs estimate it.
 * Its answers are whole from the start, so a run does not stream it: each step is one `generateText`
 * call (it still answers `doStream`, for callers who stream it themselves).
 *
 * @example
 * ```ts
 * const model = createScriptedModel({ steps: [{ toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } }] }, { text: 'done' }] })
 * await runAgent({ pool, prompt: 'check', model })
 * ```
 */
export function createScriptedModel(options: ScriptedModelOptions = {}): LanguageModelV4 {
  const script = options.steps;
  let calls = 0;
  const next = async (callOptions: LanguageModelCallOptions): Promise<ScriptedStep> => {
    const call = ++calls;
    if (script === undefined) return selfCheckStep(callOptions);
    if (typeof script === 'function') return script({ call, options: callOptions });
    const step = script[call - 1];
    if (step === undefined) throw new Error(`The scripted model has ${script.length} step(s); call ${call} has none`);
    return step;
  };
  const delay = (signal: AbortSignal | undefined): Promise<void> => wait(options.delayMs ?? 0, signal);

  const model: LanguageModelV4 & { readonly [STREAMS]: boolean } = {
    [STREAMS]: false,
    specificationVersion: 'v4',
    provider: 'scripted',
    modelId: options.modelId ?? (script === undefined ? 'self-check' : 'script'),
    supportedUrls: {},
    async doGenerate(callOptions) {
      callOptions.abortSignal?.throwIfAborted();
      const step = await next(callOptions);
      await delay(callOptions.abortSignal);
      const content = [...(step.text === undefined || step.text === '' ? [] : [{ type: 'text' as const, text: step.text }]), ...toolCallParts(step)];
      return { content, finishReason: finishReasonOf(step), usage: usageOf(step), warnings: [] };
    },
    async doStream(callOptions) {
      callOptions.abortSignal?.throwIfAborted();
      const step = await next(callOptions);
      const parts = streamParts(step);
      const signal = callOptions.abortSignal;
      let index = 0;
      const stream = new ReadableStream<LanguageModelStreamPart>({
        async pull(controller) {
          if (index >= parts.length) return controller.close();
          try {
            await delay(signal);
          } catch (error) {
            return controller.error(error);
          }
          controller.enqueue(parts[index++] as LanguageModelStreamPart);
        },
      });
      return { stream };
    },
  };
  return model;
}

function toolCallParts(step: ScriptedStep): Extract<LanguageModelStreamPart, { type: 'tool-call' }>[] {
  return (step.toolCalls ?? []).map((call, index) => ({
    type: 'tool-call',
    toolCallId: call.toolCallId ?? `scripted-${index + 1}-${Math.random().toString(36).slice(2, 10)}`,
    toolName: call.toolName,
    input: JSON.stringify(call.args ?? {}),
  }));
}

function streamParts(step: ScriptedStep): LanguageModelStreamPart[] {
  const parts: LanguageModelStreamPart[] = [{ type: 'stream-start', warnings: [] }];
  if (step.text !== undefined && step.text !== '') {
    parts.push({ type: 'text-start', id: 'text' }, { type: 'text-delta', id: 'text', delta: step.text }, { type: 'text-end', id: 'text' });
  }
  parts.push(...toolCallParts(step), { type: 'finish', finishReason: finishReasonOf(step), usage: usageOf(step) });
  return parts;
}

function finishReasonOf(step: ScriptedStep): Extract<LanguageModelStreamPart, { type: 'finish' }>['finishReason'] {
  const unified = step.finishReason ?? ((step.toolCalls ?? []).length > 0 ? 'tool-calls' : 'stop');
  return { unified, raw: undefined };
}

function usageOf(step: ScriptedStep): Extract<LanguageModelStreamPart, { type: 'finish' }>['usage'] {
  return {
    inputTokens: { total: step.usage?.inputTokens, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: step.usage?.outputTokens, text: undefined, reasoning: undefined },
  };
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
