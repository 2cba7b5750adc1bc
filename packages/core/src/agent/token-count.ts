import { asSchema, type ModelMessage, type ToolSet } from 'ai';

/**
 * How a model's tokens are counted: `o200k_base`, the tokenizer of OpenAI's GPT-4o, GPT-4.1, GPT-5 and
 * o-series models (exact for their text); `estimate`, a conservative count for any other model; or
 * `characters`, 2.5 characters a token, for the scripted model, which has no tokens.
 */
export type TokenizerName = 'o200k_base' | 'estimate' | 'characters';

/** Counts the tokens of a text, by a model's own tokenizer or by a conservative estimate. */
export interface TokenCounter {
  readonly tokenizer: TokenizerName;
  count(text: string): number;
}

/** The OpenAI models whose tokenizer is o200k_base (GPT-4o, GPT-4.1, GPT-4.5, GPT-5, o1, o3, o4), by `provider:model`. */
const O200K_MODELS = /^openai:(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4|chatgpt-4o)/i;

/**
 * Tokens a message costs besides its role and content: `<|start|>{role}<|message|>{content}<|end|>`, the
 * `tokens_per_message` of OpenAI's cookbook for the Chat Completions API (checked against the counts the API
 * reported for the cookbook's examples: `token-count-published.test.ts`). The Responses API's framing is not
 * published; Klym takes it to be the same.
 */
const MESSAGE_OVERHEAD = 3;
/** Tokens every request costs besides its messages: the answer is primed with `<|start|>assistant<|message|>`. */
const REPLY_PRIMING = 3;
/** Tokens a tool call, a tool result or a tool's definition costs besides its text (its kind, separators). */
const PART_OVERHEAD = 6;
/**
 * Tokens counted for an image or other file: not its base64 text, which the provider never tokenizes. An
 * image at high detail costs GPT-4o at most about 1,500 tokens; Gemini, 258 per image tile.
 */
const FILE_TOKENS = 1_600;

/**
 * Characters a token of the scripted model: it has no tokenizer (and no window), so its texts count at the
 * rate of logs in o200k, and artifacts and compaction treat it as a model of `ARTIFACT_DEFAULTS.contextWindow`.
 */
const SCRIPTED_CHARS_PER_TOKEN = 2.5;

/** Whether `model` is Klym's scripted model: `scripted`, or a scripted model given as a model (`scripted:script`). */
export function isScripted(model: string): boolean {
  return model === 'scripted' || model.startsWith('scripted:');
}

/** The tokenizer Klym counts `model` (`provider:model`) with: o200k_base for OpenAI's models that use it, characters for the scripted model, else an estimate. */
export function tokenizerOf(model: string): TokenizerName {
  if (isScripted(model)) return 'characters';
  return O200K_MODELS.test(model) ? 'o200k_base' : 'estimate';
}

/**
 * The token counter of `model` (`provider:model`): OpenAI's o200k_base (through `gpt-tokenizer`, loaded the first
 * time a run needs it: its tables take a quarter of a second to load) for the models that use it, else
 * {@link estimateTokens}. Special tokens in a text (`<|endoftext|>`) are counted as the text they are.
 */
export async function createTokenCounter(model: string): Promise<TokenCounter> {
  const tokenizer = tokenizerOf(model);
  if (tokenizer === 'characters') return { tokenizer, count: (text) => Math.ceil(text.length / SCRIPTED_CHARS_PER_TOKEN) };
  if (tokenizer === 'estimate') return { tokenizer, count: estimateTokens };
  const { countTokens } = await import('gpt-tokenizer/encoding/o200k_base');
  // A tool result may hold `<|endoftext|>`; by default the tokenizer throws on it, where a provider reads it as text.
  const asText = { disallowedSpecial: new Set<string>() };
  return { tokenizer: 'o200k_base', count: (text) => (text === '' ? 0 : countTokens(text, asText)) };
}

/**
 * A conservative count of the tokens of `text` for a model whose tokenizer Klym does not have (Gemini,
 * `compatible:` models): never "characters ÷ 4", which undercounts logs and numbers (they take about 2.5
 * characters a token in o200k) by 40%. Each digit is a token (Gemini's, Qwen's and Mistral's tokenizers
 * split numbers into digits), each punctuation mark is one, a run of Latin letters takes one per 4 letters,
 * a run of other letters (Cyrillic, Greek) one per 2, any other character (CJK, emoji) one each, and a
 * line break or a run of blanks one (a single space joins the word after it). A run's reported usage
 * corrects it (see `createContextWindow`).
 */
export function estimateTokens(text: string): number {
  let tokens = 0;
  let latin = 0;
  let other = 0;
  const endWord = (): void => {
    tokens += Math.ceil(latin / 4) + Math.ceil(other / 2);
    latin = 0;
    other = 0;
  };
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if ((code >= 65 && code <= 90) || (code >= 97 && code <= 122)) {
      latin++;
      continue;
    }
    if (code >= 0xc0 && code <= 0x52f && code !== 0xd7 && code !== 0xf7) {
      other++;
      continue;
    }
    endWord();
    if (code === 32) {
      // One space before a word is part of the word's token; more blanks, or a blank before anything else, are one.
      const next = text.charCodeAt(index + 1);
      if (next === 32 || next === 9 || next === 10 || next === 13) {
        while (isBlank(text.charCodeAt(index + 1))) index++;
        tokens++;
      }
      continue;
    }
    if (isBlank(code)) {
      while (isBlank(text.charCodeAt(index + 1))) index++;
      tokens++;
      continue;
    }
    // A UTF-16 surrogate pair is one character: one token.
    if (code >= 0xd800 && code <= 0xdbff) index++;
    tokens++;
  }
  endWord();
  return tokens;
}

function isBlank(code: number): boolean {
  return code === 32 || code === 9 || code === 10 || code === 13;
}

/**
 * The tokens one message of a conversation costs, counted with `count`: its role and the
 * {@link MESSAGE_OVERHEAD} around it, its texts, tool calls (name and JSON input), tool results (as the model
 * reads them) and reasoning, each tool part with a small overhead for the wrapping a provider adds; a file as
 * {@link FILE_TOKENS}.
 */
export function messageTokens(message: ModelMessage, count: (text: string) => number): number {
  let tokens = MESSAGE_OVERHEAD + count(message.role);
  if (typeof message.content === 'string') return tokens + count(message.content);
  for (const part of message.content) {
    switch (part.type) {
      case 'text':
      case 'reasoning':
        tokens += count(part.text);
        break;
      case 'tool-call':
        tokens += PART_OVERHEAD + count(part.toolCallId) + count(part.toolName) + count(JSON.stringify(part.input ?? {}));
        break;
      case 'tool-result':
        tokens += PART_OVERHEAD + count(part.toolCallId) + count(part.toolName) + outputTokens(part.output, count);
        break;
      case 'image':
      case 'file':
        tokens += FILE_TOKENS;
        break;
      default:
        tokens += count(JSON.stringify(part));
        break;
    }
  }
  return tokens;
}

/**
 * The tokens a request costs besides its conversation's messages and tool definitions: its system prompt,
 * sent as the first message (role `system`, or `developer` for reasoning models: one token either way), and
 * the tokens that prime the answer.
 */
export function requestFrameTokens(system: string, count: (text: string) => number): number {
  return MESSAGE_OVERHEAD + count('system') + count(system) + REPLY_PRIMING;
}

/**
 * The tokens of a conversation's messages ({@link messageTokens}, counted with `count`), each message counted
 * once, however often a conversation holding it is measured: a run's loop measures its whole history at
 * every step. Messages are known by identity: a run never changes one, it makes a new one.
 */
export function createMessagesCounter(count: (text: string) => number): (messages: readonly ModelMessage[]) => number {
  const sizes = new WeakMap<ModelMessage, number>();
  return (messages) => {
    let tokens = 0;
    for (const message of messages) {
      let size = sizes.get(message);
      if (size === undefined) sizes.set(message, (size = messageTokens(message, count)));
      tokens += size;
    }
    return tokens;
  };
}

type ToolOutput = Extract<ModelMessage, { role: 'tool' }>['content'][number] extends infer Part
  ? Part extends { type: 'tool-result'; output: infer O }
    ? O
    : never
  : never;

function outputTokens(output: ToolOutput, count: (text: string) => number): number {
  switch (output.type) {
    case 'text':
    case 'error-text':
      return count(output.value);
    case 'content': {
      let tokens = 0;
      for (const item of output.value) tokens += item.type === 'text' ? count(item.text) : FILE_TOKENS;
      return tokens;
    }
    default:
      return count(JSON.stringify('value' in output ? output.value : output));
  }
}

/**
 * The tokens of the tool definitions a request sends: each tool's name, description and JSON schema, as
 * `{"type":"function","function":{…}}`. OpenAI's APIs render a tool more tersely than its JSON, so this counts
 * more than they do, never less: 94 tokens for the cookbook's weather tool, which the API counted as 68
 * (`token-count-published.test.ts`). `visible` narrows it to the tools the model is offered.
 */
export function toolDefinitionTokens(tools: ToolSet, count: (text: string) => number, visible?: (name: string) => boolean): number {
  let tokens = 0;
  for (const [name, tool] of Object.entries(tools)) {
    if (visible !== undefined && !visible(name)) continue;
    const schema: unknown = tool.inputSchema === undefined ? {} : asSchema(tool.inputSchema).jsonSchema;
    // A schema that is still being made (a promise) is counted by its name alone; MCP tools' schemas never are.
    const parameters = typeof (schema as PromiseLike<unknown> | undefined)?.then === 'function' ? {} : schema;
    tokens += PART_OVERHEAD + count(JSON.stringify({ type: 'function', function: { name, description: tool.description ?? '', parameters, strict: false } }));
  }
  return tokens;
}
