import type { ModelMessage, ToolSet } from 'ai';
import { ARTIFACT_DEFAULTS, CONTEXT_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { createMessagesCounter, isScripted, requestFrameTokens, toolDefinitionTokens, type TokenCounter, type TokenizerName } from './token-count.ts';

/**
 * Context windows, in tokens, of the OpenAI and Gemini models Klym names, as their providers publish them. A
 * dated snapshot (`gpt-4.1-mini-2025-04-14`) takes its model's. GPT-5's window is 400,000 tokens of which at
 * most 272,000 may be input: Klym counts what it sends, so 272,000. Pass `contextWindows` to correct or extend.
 */
export const DEFAULT_CONTEXT_WINDOWS: Readonly<Record<string, number>> = {
  'openai:gpt-4.1': 1_047_576,
  'openai:gpt-4.1-mini': 1_047_576,
  'openai:gpt-4.1-nano': 1_047_576,
  'openai:gpt-4o': 128_000,
  'openai:gpt-4o-mini': 128_000,
  'openai:gpt-5': 272_000,
  'openai:gpt-5-mini': 272_000,
  'openai:gpt-5-nano': 272_000,
  'openai:o1': 200_000,
  'openai:o3': 200_000,
  'openai:o3-mini': 200_000,
  'openai:o4-mini': 200_000,
  'google:gemini-2.5-pro': 1_048_576,
  'google:gemini-2.5-flash': 1_048_576,
  'google:gemini-2.5-flash-lite': 1_048_576,
  'google:gemini-2.0-flash': 1_048_576,
};

/** A model's context window and where it came from. */
export interface ModelContextWindow {
  /** Tokens; `Infinity` for the scripted model, which has no window. */
  readonly tokens: number;
  /**
   * `configured` (`contextWindows`), `built-in` ({@link DEFAULT_CONTEXT_WINDOWS}), `default` (a model Klym
   * does not know), or, once a provider refused a request naming a smaller window, `provider`.
   */
  readonly source: 'configured' | 'built-in' | 'default' | 'provider';
}

/**
 * The context window of `model` (`provider:model`): from `contextWindows` (by full name, then by model id
 * alone, as prices are looked up), then {@link DEFAULT_CONTEXT_WINDOWS} (a dated snapshot takes its model's),
 * else `CONTEXT_DEFAULTS.unknownModelWindow`. The scripted model has none.
 */
export function contextWindowOf(model: string, contextWindows: Readonly<Record<string, number>> = {}): ModelContextWindow {
  if (isScripted(model)) return { tokens: Number.POSITIVE_INFINITY, source: 'built-in' };
  const id = model.includes(':') ? model.slice(model.indexOf(':') + 1) : model;
  const configured = contextWindows[model] ?? contextWindows[id];
  if (configured !== undefined) return { tokens: configured, source: 'configured' };
  let known: string | undefined;
  for (const name of Object.keys(DEFAULT_CONTEXT_WINDOWS)) {
    if ((model === name || model.startsWith(`${name}-`)) && (known === undefined || name.length > known.length)) known = name;
  }
  if (known !== undefined) return { tokens: DEFAULT_CONTEXT_WINDOWS[known] ?? 0, source: 'built-in' };
  return { tokens: CONTEXT_DEFAULTS.unknownModelWindow, source: 'default' };
}

/** The tokens a request keeps free for the model's answer: a share of the window, capped (`CONTEXT_DEFAULTS`). */
export function answerReserve(window: number): number {
  if (!Number.isFinite(window)) return 0;
  return Math.min(Math.ceil(window * CONTEXT_DEFAULTS.answerReserveShare), CONTEXT_DEFAULTS.answerReserveMaxTokens);
}

/**
 * The tokens over which a tool result of a run on `model` becomes an artifact: `ARTIFACT_DEFAULTS.thresholdShare`
 * of its context window, or, for the scripted model, which has none, of `ARTIFACT_DEFAULTS.contextWindow`.
 */
export function artifactThreshold(model: string, contextWindows?: Readonly<Record<string, number>>): number {
  const { tokens } = contextWindowOf(model, contextWindows);
  return Math.floor(ARTIFACT_DEFAULTS.thresholdShare * (Number.isFinite(tokens) ? tokens : ARTIFACT_DEFAULTS.contextWindow));
}

/** Options of {@link createContextWindow}. */
export interface ContextWindowOptions {
  /** The model, `provider:model`. */
  readonly model: string;
  /** Windows by model, on top of {@link DEFAULT_CONTEXT_WINDOWS}. */
  readonly contextWindows?: Readonly<Record<string, number>>;
  readonly counter: TokenCounter;
  /** The system prompt every request sends. */
  readonly system: string;
  /** The tools every request sends (those `visible` says the model is offered). */
  readonly tools: ToolSet;
  readonly visible?: (toolName: string) => boolean;
}

/** Whether a request fits: its count, the most it may count (the window less the answer's room), and the window. */
export interface WindowFit {
  readonly fits: boolean;
  readonly tokens: number;
  readonly limit: number;
}

/**
 * A run's accounting of its model's context window: it counts each request (system prompt, messages, tool
 * definitions), learns from the usage the provider reports, and keeps the tool results it dropped to fit.
 */
export interface ContextWindow {
  readonly model: string;
  /** The window, in tokens (smaller than configured once the provider said its own is). */
  readonly window: number;
  readonly source: ModelContextWindow['source'];
  /** Tokens kept free for the answer: a request may count at most `window - reserve`. */
  readonly reserve: number;
  readonly tokenizer: TokenizerName;
  /**
   * The tokens of a request sending `messages`, corrected by what the provider reported for an earlier
   * request of the run: the reported count of that request plus the count of what was added since, scaled
   * up (never down) by the run's ratio of reported to counted tokens; for a request smaller than that one,
   * its count scaled by the ratio.
   */
  requestTokens(messages: readonly ModelMessage[]): number;
  /** Whether a request sending `messages` fits the window with room for the answer. */
  fits(messages: readonly ModelMessage[]): WindowFit;
  /** `messages` as they are sent: the tool results dropped to fit replaced by a short note. The input is not changed. */
  sendable(messages: readonly ModelMessage[]): readonly ModelMessage[];
  /**
   * The `CONTEXT_OVERFLOW` error of a request of `tokens` that does not fit: not sent, or, given the provider's
   * refusal as `cause`, refused and not to be shrunk enough.
   */
  overflow(tokens: number, cause?: unknown): KlymError;
  /** Tells it the provider counted `inputTokens` for a request sending `messages`. */
  reported(messages: readonly ModelMessage[], inputTokens: number): void;
  /** Tells it the provider refused a request of `messages` as too long, with the window and count it gave, if any. */
  refused(messages: readonly ModelMessage[], said: ContextLengthExceeded): void;
  /**
   * Drops the oldest tool results (not the latest step's) from what is sent until a request fits within
   * `target` tokens (@default the window less the reserve); the system prompt, the user's messages and the
   * latest step are kept. Returns how many results it dropped and the request's count, or `undefined` when
   * even without every older result it would not fit (nothing is dropped then).
   */
  shrink(messages: readonly ModelMessage[], target?: number): { readonly dropped: number; readonly tokens: number } | undefined;
}

/** What a provider said when it refused a request as longer than its window: the window and count, when it gave them. */
export interface ContextLengthExceeded {
  readonly window?: number;
  readonly tokens?: number;
}

/** The text a dropped tool result is replaced by. */
export const DROPPED_RESULT_NOTE = "[Klym dropped this tool result to fit the model's context window. Call the tool again, asking for less, if you need it.]";

/** A run's {@link ContextWindow}. */
export function createContextWindow(options: ContextWindowOptions): ContextWindow {
  const { model, counter } = options;
  const known = contextWindowOf(model, options.contextWindows);
  let window = known.tokens;
  let source = known.source;
  const unbounded = !Number.isFinite(window);
  const count = (text: string): number => counter.count(text);
  // Counted once per run: every request sends the same system prompt and tools.
  const fixed = unbounded ? 0 : requestFrameTokens(options.system, count) + toolDefinitionTokens(options.tools, count, options.visible);
  const countMessages = createMessagesCounter(count);
  const dropped = new Set<string>();
  // A message as sent, by the number of results dropped when it was made: a later shrink may drop more of it.
  const notes = new WeakMap<ModelMessage, { readonly drops: number; readonly note: ModelMessage }>();
  let anchor: { readonly counted: number; readonly reported: number } | undefined;

  const counted = (messages: readonly ModelMessage[]): number => fixed + countMessages(messages);
  const corrected = (raw: number): number => {
    if (anchor === undefined) return raw;
    const ratio = anchor.reported / anchor.counted;
    if (raw < anchor.counted) return Math.ceil(raw * ratio);
    return anchor.reported + Math.ceil((raw - anchor.counted) * Math.max(ratio, 1));
  };
  const sendable = (messages: readonly ModelMessage[]): readonly ModelMessage[] => {
    if (dropped.size === 0) return messages;
    return messages.map((message) => {
      if (message.role !== 'tool' || !message.content.some((part) => part.type === 'tool-result' && dropped.has(part.toolCallId))) return message;
      const made = notes.get(message);
      if (made?.drops === dropped.size) return made.note;
      const content = message.content.map((part) =>
        part.type === 'tool-result' && dropped.has(part.toolCallId) ? { ...part, output: { type: 'text' as const, value: DROPPED_RESULT_NOTE } } : part,
      );
      const note = { ...message, content };
      notes.set(message, { drops: dropped.size, note });
      return note;
    });
  };
  const requestTokens = (messages: readonly ModelMessage[]): number => (unbounded ? 0 : corrected(counted(sendable(messages))));
  const limit = (): number => window - answerReserve(window);

  const contextWindow: ContextWindow = {
    model,
    get window() {
      return window;
    },
    get source() {
      return source;
    },
    get reserve() {
      return answerReserve(window);
    },
    tokenizer: counter.tokenizer,
    requestTokens,
    fits(messages) {
      const tokens = requestTokens(messages);
      return { fits: tokens <= limit(), tokens, limit: limit() };
    },
    sendable,
    overflow(tokens, cause) {
      const where =
        source === 'default'
          ? `Klym's window for a model it does not know; set \`llm.contextWindows\` for ${model}`
          : source === 'provider'
            ? 'as the provider said'
            : source;
      const how = counter.tokenizer === 'estimate' ? 'estimated' : `counted with ${counter.tokenizer}`;
      const outcome = cause === undefined ? 'it was not sent' : 'the provider refused it, and dropping older tool results would not make it fit';
      return new KlymError(
        'CONTEXT_OVERFLOW',
        `The request to model ${model} would take ${tokens} tokens (${how}), more than its context window of ${window} tokens (${where}) less ${answerReserve(window)} kept for the answer; ${outcome}`,
        cause === undefined ? {} : { cause },
      );
    },
    reported(messages, inputTokens) {
      if (unbounded || !(inputTokens > 0)) return;
      anchor = { counted: counted(sendable(messages)), reported: inputTokens };
    },
    refused(messages, said) {
      if (unbounded) return;
      if (said.window !== undefined && said.window > 0 && said.window < window) {
        window = said.window;
        source = 'provider';
      }
      if (said.tokens !== undefined && said.tokens > 0) anchor = { counted: counted(sendable(messages)), reported: said.tokens };
    },
    shrink(messages, target = limit()) {
      if (unbounded) return { dropped: 0, tokens: 0 };
      const lastAssistant = messages.findLastIndex((message) => message.role === 'assistant');
      const candidates: string[] = [];
      for (const message of messages.slice(0, Math.max(lastAssistant, 0))) {
        if (message.role !== 'tool') continue;
        for (const part of message.content) if (part.type === 'tool-result' && !dropped.has(part.toolCallId)) candidates.push(part.toolCallId);
      }
      const added: string[] = [];
      let tokens = requestTokens(messages);
      for (const toolCallId of candidates) {
        if (tokens <= target) break;
        dropped.add(toolCallId);
        added.push(toolCallId);
        tokens = requestTokens(messages);
      }
      if (tokens <= target) return { dropped: added.length, tokens };
      for (const toolCallId of added) dropped.delete(toolCallId);
      return undefined;
    },
  };
  return contextWindow;
}

/**
 * Whether `error` is a provider's refusal of a request longer than the model's window — OpenAI's HTTP 400
 * `context_length_exceeded` ("This model's maximum context length is N tokens. However, your messages
 * resulted in M tokens…"), Gemini's 400 `INVALID_ARGUMENT` ("The input token count (M) exceeds the maximum
 * number of tokens allowed (N)") — with the window and count it gave; `undefined` for any other error.
 */
export function contextLengthExceeded(error: unknown): ContextLengthExceeded | undefined {
  for (let current: unknown = error, depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    const { statusCode, responseBody, message } = current as { statusCode?: unknown; responseBody?: unknown; message?: unknown };
    const text = `${typeof responseBody === 'string' ? responseBody : ''} ${typeof message === 'string' ? message : ''}`;
    if (
      (statusCode === undefined || statusCode === 400) &&
      /context_length_exceeded|maximum context length|input token count.{0,40}exceeds the maximum/is.test(text)
    ) {
      const openai = /maximum context length is (\d+) tokens.*?resulted in (\d+) tokens/is.exec(text);
      if (openai !== null) return { window: Number(openai[1]), tokens: Number(openai[2]) };
      const gemini = /input token count \(?(\d+)\)? exceeds the maximum number of tokens allowed \(?(\d+)\)?/is.exec(text);
      if (gemini !== null) return { window: Number(gemini[2]), tokens: Number(gemini[1]) };
      return {};
    }
    current = (current as { lastError?: unknown; cause?: unknown }).lastError ?? (current as { cause?: unknown }).cause;
  }
  return undefined;
}
