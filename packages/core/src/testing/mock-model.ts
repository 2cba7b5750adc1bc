import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';
import type { LanguageModelCallOptions, LanguageModelStreamPart } from '../agent/language-model.ts';

export type StreamResult = Awaited<ReturnType<MockLanguageModelV4['doStream']>>;

/** One model turn for {@link createMockModel}: text, tool calls, and the usage the provider reports. */
export interface MockTurn {
  readonly text?: string;
  /** Calls to make: `args` is encoded as JSON, or `input` is sent as it is (to send broken JSON). */
  readonly toolCalls?: readonly { readonly id?: string; readonly name: string; readonly args?: unknown; readonly input?: string }[];
  /** Reported token counts; `null` reports none (the run then estimates them). @default { input: 100, output: 20 } */
  readonly usage?: { readonly input: number; readonly output: number } | null;
}

/** A turn, or a function that answers the call with any stream (to hang, fail, or read the prompt first). */
export type MockStep = MockTurn | ((options: LanguageModelCallOptions) => StreamResult | Promise<StreamResult>);

/** The stream parts a provider would send for `turn`. */
export function mockTurnParts(turn: MockTurn): LanguageModelStreamPart[] {
  const parts: LanguageModelStreamPart[] = [{ type: 'stream-start', warnings: [] }];
  if (turn.text !== undefined) parts.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: turn.text }, { type: 'text-end', id: 't' });
  for (const [index, call] of (turn.toolCalls ?? []).entries()) {
    parts.push({ type: 'tool-call', toolCallId: call.id ?? `call-${index + 1}`, toolName: call.name, input: call.input ?? JSON.stringify(call.args ?? {}) });
  }
  const usage = turn.usage === undefined ? { input: 100, output: 20 } : turn.usage;
  parts.push({
    type: 'finish',
    finishReason: { unified: (turn.toolCalls ?? []).length > 0 ? 'tool-calls' : 'stop', raw: undefined },
    usage: {
      inputTokens: { total: usage?.input, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: usage?.output, text: undefined, reasoning: undefined },
    },
  });
  return parts;
}

/**
 * The AI SDK's `MockLanguageModelV4`, scripted step by step: its n-th call is answered with `steps[n - 1]`;
 * a call past the end fails. Its `doStreamCalls` keep every call's prompt, tools and abort signal.
 *
 * @example
 * ```ts
 * const model = createMockModel([{ toolCalls: [{ name: 'grynya__query_graph', args: { query: 'RETURN 1' } }] }, { text: 'done' }])
 * await runAgent({ pool, prompt: 'check', model })
 * ```
 */
export function createMockModel(steps: readonly MockStep[]): MockLanguageModelV4 {
  let call = 0;
  return new MockLanguageModelV4({
    provider: 'mock',
    modelId: 'scripted-steps',
    doStream: async (options) => {
      const step = steps[call++];
      if (step === undefined) throw new Error(`The mock model has ${steps.length} step(s); call ${call} has none`);
      if (typeof step === 'function') return step(options);
      return { stream: convertArrayToReadableStream(mockTurnParts(step)) };
    },
  });
}

/** A step that streams `text`, calls `onStarted`, then waits for the call's abort and fails with its reason. */
export function textUntilAborted(text: string, onStarted?: () => void): (options: LanguageModelCallOptions) => StreamResult {
  return (options) => ({
    stream: new ReadableStream<LanguageModelStreamPart>({
      start(controller) {
        controller.enqueue({ type: 'stream-start', warnings: [] });
        controller.enqueue({ type: 'text-start', id: 't' });
        controller.enqueue({ type: 'text-delta', id: 't', delta: text });
        options.abortSignal?.addEventListener('abort', () => controller.error(options.abortSignal?.reason), { once: true });
        onStarted?.();
      },
    }),
  });
}
