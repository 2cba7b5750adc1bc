import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';

/**
 * One answer of the fake: a model turn (rendered in the endpoint's streaming format), an HTTP failure, no answer at
 * all, or an answer given `later`, once the test settles its promise (the request waits meanwhile). A turn or a
 * failure with `delayMs` is answered that long after its request arrived, as a model that takes its time would.
 */
export type FakeReply =
  | { readonly kind: 'later'; readonly reply: PromiseLike<FakeReply> }
  | {
      readonly kind: 'turn';
      readonly text?: string;
      readonly toolCalls?: readonly { readonly name: string; readonly args: unknown }[];
      readonly usage?: { readonly input: number; readonly output: number };
      readonly delayMs?: number;
    }
  | { readonly kind: 'fail'; readonly status: number; readonly headers?: Readonly<Record<string, string>>; readonly body: string; readonly delayMs?: number }
  | { readonly kind: 'hang' };

/** A request the fake received. */
export interface FakeRequest {
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  readonly json: unknown;
  /** The request's input tokens as the fake counts them ({@link requestTokens}); only with a `contextWindow`. */
  readonly tokens?: number;
}

/** Options of {@link startFakeLlmServer}. */
export interface FakeLlmServerOptions {
  /**
   * A hard context window, in tokens: a request to `/v1/chat/completions` or `/v1/responses` counting more
   * ({@link requestTokens}) is answered 400 with OpenAI's own `context_length_exceeded` error, whatever the
   * replies say (it takes none of them); a turn that gives no `usage` reports the count as its input tokens.
   * @default none: every request takes the next reply
   */
  readonly contextWindow?: number;
}

/** A local stand-in for the OpenAI API (`/v1/responses`, `/v1/chat/completions`) and Gemini's `streamGenerateContent`. */
export interface FakeLlmServer extends AsyncDisposable {
  /** `http://127.0.0.1:<port>/v1`: the base URL for the OpenAI provider. */
  readonly openaiBaseUrl: string;
  /** `http://127.0.0.1:<port>/v1beta`: the base URL for the Google provider. */
  readonly googleBaseUrl: string;
  /** Every request, in order. */
  readonly requests: FakeRequest[];
  /** Replies still to give, in order; a request with none left gets a 500. (Empty when a function decides.) */
  readonly replies: FakeReply[];
  /** Requests given a `hang` whose client closed the connection (a model request that was cancelled); not those the fake's own `close` cut. */
  readonly abandoned: FakeRequest[];
  close(): Promise<void>;
}

/**
 * Starts the fake on a loopback port. Every request takes the next reply of `replies` (or, given a
 * function, the reply it decides from the request); a turn is streamed as server-sent events in the format
 * of the endpoint that was called, with its tool calls and usage.
 */
export async function startFakeLlmServer(
  replies: readonly FakeReply[] | ((request: FakeRequest) => FakeReply) = [],
  options: FakeLlmServerOptions = {},
): Promise<FakeLlmServer> {
  const { contextWindow } = options;
  const requests: FakeRequest[] = [];
  const queue: FakeReply[] = typeof replies === 'function' ? [] : [...replies];
  const decide = typeof replies === 'function' ? replies : (): FakeReply | undefined => queue.shift();
  const hanging = new Set<ServerResponse>();
  const abandoned: FakeRequest[] = [];
  let closing: Promise<void> | undefined;
  const delayed = new Set<NodeJS.Timeout>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const path = request.url ?? '/';
      const counted = contextWindow !== undefined && isOpenAiPath(path) ? requestTokens(json) : undefined;
      const received: FakeRequest = { path, headers: request.headers, body, json, ...(counted === undefined ? {} : { tokens: counted }) };
      requests.push(received);
      if (contextWindow !== undefined && counted !== undefined && counted > contextWindow) {
        response.writeHead(400, { 'content-type': 'application/json' }).end(contextLengthExceededBody(contextWindow, counted));
        return;
      }
      const decided = decide(received);
      // A turn without usage reports what the fake counted, as a provider reports its count.
      const reply =
        counted !== undefined && decided?.kind === 'turn' && decided.usage === undefined ? { ...decided, usage: { input: counted, output: 20 } } : decided;
      const onAbandon = (): void => {
        if (closing === undefined) abandoned.push(received);
      };
      const delayMs = reply?.kind === 'turn' || reply?.kind === 'fail' ? (reply.delayMs ?? 0) : 0;
      if (delayMs <= 0) {
        answer(path, reply, response, hanging, onAbandon);
        return;
      }
      const timer = setTimeout(() => {
        delayed.delete(timer);
        answer(path, reply, response, hanging, onAbandon);
      }, delayMs);
      delayed.add(timer);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const fake: FakeLlmServer = {
    openaiBaseUrl: `http://127.0.0.1:${port}/v1`,
    googleBaseUrl: `http://127.0.0.1:${port}/v1beta`,
    requests,
    replies: queue,
    abandoned,
    close() {
      closing ??= (async () => {
        for (const timer of delayed) clearTimeout(timer);
        for (const response of hanging) response.destroy();
        server.closeAllConnections();
        server.close();
        await once(server, 'close');
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => fake.close(),
  };
  return fake;
}

function answer(path: string, reply: FakeReply | undefined, response: ServerResponse, hanging: Set<ServerResponse>, onAbandoned: () => void): void {
  if (reply === undefined) {
    response.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'the fake has no reply left' } }));
    return;
  }
  if (reply.kind === 'later') {
    void Promise.resolve(reply.reply).then((settled) => answer(path, settled, response, hanging, onAbandoned));
    return;
  }
  if (reply.kind === 'hang') {
    hanging.add(response);
    response.on('close', () => {
      hanging.delete(response);
      onAbandoned();
    });
    return;
  }
  if (reply.kind === 'fail') {
    response.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(reply.body);
    return;
  }
  const events = path.includes('/responses')
    ? responsesEvents(reply)
    : path.includes('/chat/completions')
      ? chatEvents(reply)
      : path.includes(':streamGenerateContent')
        ? geminiEvents(reply)
        : undefined;
  if (events === undefined) {
    response.writeHead(404).end(`no fake for ${path}`);
    return;
  }
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const event of events) response.write(event === '[DONE]' ? 'data: [DONE]\n\n' : `data: ${JSON.stringify(event)}\n\n`);
  response.end();
}

type Turn = Extract<FakeReply, { kind: 'turn' }>;

function responsesEvents(turn: Turn): unknown[] {
  const events: unknown[] = [{ type: 'response.created', response: { id: 'resp_fake', created_at: 1_700_000_000, model: 'fake' } }];
  let index = 0;
  if (turn.text !== undefined) {
    const item = { type: 'message', id: 'msg_fake' };
    events.push(
      { type: 'response.output_item.added', output_index: index, item },
      { type: 'response.output_text.delta', item_id: 'msg_fake', output_index: index, delta: turn.text },
      { type: 'response.output_item.done', output_index: index, item },
    );
    index++;
  }
  for (const [number, call] of (turn.toolCalls ?? []).entries()) {
    const args = JSON.stringify(call.args);
    const item = { type: 'function_call', id: `fc_${number}`, call_id: `call_${number}_${Date.now()}`, name: call.name };
    events.push(
      { type: 'response.output_item.added', output_index: index, item: { ...item, arguments: '' } },
      { type: 'response.function_call_arguments.delta', item_id: item.id, output_index: index, delta: args },
      { type: 'response.output_item.done', output_index: index, item: { ...item, arguments: args, status: 'completed' } },
    );
    index++;
  }
  const usage = turn.usage ?? { input: 100, output: 20 };
  events.push({ type: 'response.completed', response: { usage: { input_tokens: usage.input, output_tokens: usage.output } } });
  return events;
}

const chunk = (choice: unknown): unknown => ({
  id: 'chatcmpl-fake',
  object: 'chat.completion.chunk',
  created: 1_700_000_000,
  model: 'fake',
  choices: [choice],
});

function chatEvents(turn: Turn): unknown[] {
  const events: unknown[] = [chunk({ index: 0, delta: { role: 'assistant', content: turn.text ?? '' }, finish_reason: null })];
  for (const [number, call] of (turn.toolCalls ?? []).entries()) {
    const toolCall = {
      index: number,
      id: `call_${number}_${Date.now()}`,
      type: 'function',
      function: { name: call.name, arguments: JSON.stringify(call.args) },
    };
    events.push(chunk({ index: 0, delta: { tool_calls: [toolCall] }, finish_reason: null }));
  }
  events.push(chunk({ index: 0, delta: {}, finish_reason: (turn.toolCalls ?? []).length > 0 ? 'tool_calls' : 'stop' }));
  const usage = turn.usage ?? { input: 100, output: 20 };
  events.push({
    id: 'chatcmpl-fake',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: 'fake',
    choices: [],
    usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
  });
  events.push('[DONE]');
  return events;
}

function geminiEvents(turn: Turn): unknown[] {
  const events: unknown[] = [];
  if (turn.text !== undefined) events.push({ candidates: [{ content: { parts: [{ text: turn.text }], role: 'model' }, index: 0 }] });
  const usage = turn.usage ?? { input: 100, output: 20 };
  const calls = (turn.toolCalls ?? []).map((call) => ({ functionCall: { name: call.name, args: call.args } }));
  events.push({
    candidates: [{ content: { parts: calls.length > 0 ? calls : [{ text: '' }], role: 'model' }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: usage.input, candidatesTokenCount: usage.output, totalTokenCount: usage.input + usage.output },
  });
  return events;
}

function isOpenAiPath(path: string): boolean {
  return path.includes('/chat/completions') || path.includes('/responses');
}

/** OpenAI's answer to a request longer than the model's window, word for word (HTTP 400). */
export function contextLengthExceededBody(window: number, tokens: number): string {
  return JSON.stringify({
    error: {
      message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  });
}

/** Fields of a message or input item whose strings a model reads; ids, types and statuses are not read as text. */
const READ_FIELDS = new Set(['role', 'content', 'text', 'name', 'arguments', 'output', 'function', 'tool_calls', 'refusal']);

/**
 * The input tokens of an OpenAI request (chat completions or responses), counted with o200k_base and the framing
 * Klym counts with (OpenAI's cookbook's for a chat: 3 tokens per message plus its texts, 3 to prime the answer),
 * applied alike to the Responses API's input items and instructions, whose framing is not published; tool call
 * names and arguments and tool outputs as their text, and the tool definitions as JSON (more than OpenAI counts).
 * Not the provider's count: Klym's against OpenAI's published counts is `token-count-published.test.ts`.
 */
export function requestTokens(json: unknown): number {
  const body = (json ?? {}) as { messages?: unknown; input?: unknown; instructions?: unknown; tools?: unknown };
  let tokens = 3;
  if (typeof body.instructions === 'string') tokens += 3 + count(body.instructions);
  if (typeof body.input === 'string') tokens += 3 + count(body.input);
  const items = [...(Array.isArray(body.messages) ? body.messages : []), ...(Array.isArray(body.input) ? body.input : [])];
  for (const item of items) tokens += 3 + readTokens(item);
  if (Array.isArray(body.tools) && body.tools.length > 0) tokens += count(JSON.stringify(body.tools));
  return tokens;
}

/** o200k_base, special tokens read as the text they are (as a provider reads a prompt). */
function count(text: string): number {
  return countTokens(text, { disallowedSpecial: new Set() });
}

function readTokens(value: unknown): number {
  if (typeof value === 'string') return count(value);
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + readTokens(item), 0);
  if (typeof value !== 'object' || value === null) return 0;
  let tokens = 0;
  for (const [key, field] of Object.entries(value)) if (READ_FIELDS.has(key)) tokens += readTokens(field);
  return tokens;
}
