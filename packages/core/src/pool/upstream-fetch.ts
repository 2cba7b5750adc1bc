import { Readable } from 'node:stream';
import type { FetchLike, RequestId } from '@modelcontextprotocol/client';
import { Agent, fetch as undiciFetch, request, type Dispatcher } from 'undici';
import { UPSTREAM_DEFAULTS } from '../defaults.ts';
import { describeSize, tooLargeAnswer, type MessageLimit } from './message-limit.ts';
import { limitSseEvents } from './sse-event-limit.ts';

/** A `fetch` for one upstream, with its own connection pool, and the means to close it. */
export interface UpstreamFetch {
  readonly fetch: FetchLike;
  close(): Promise<void>;
}

/**
 * Builds the `fetch` the SDK transports use for one upstream. Node's global `fetch` silently drops a
 * `Host` header, and grynya-mcp-server answers 421 to a Host outside its allow-list; so the Host header
 * (if any) is set below fetch, by an undici dispatcher interceptor, where it is really sent.
 *
 * The POSTs that carry each message go through `undici.request` on the same dispatcher, answered as a
 * `Response`; everything else (the SSE streams' GETs, a session's DELETE) through undici's `fetch`. A
 * POST through `fetch` cost ~280 µs of CPU more, most of it writing its body as a web stream, and
 * cancelling a 202's body threw a `DOMException` each time.
 *
 * Every message the upstream sends is held to `limit.maxMessageBytes`: a JSON answer to a POST, each
 * event of an SSE stream (a POST's, or a GET's). One over it is not read whole and is replaced by the error
 * answer to the request it answered (see `limitSseEvents` and `readJsonAnswer`).
 */
export function createUpstreamFetch(
  host: string | undefined,
  limit: MessageLimit = { maxMessageBytes: UPSTREAM_DEFAULTS.maxMessageBytes, onDropped: () => {} },
): UpstreamFetch {
  const agent = new Agent();
  const dispatcher: Dispatcher = host === undefined ? agent : agent.compose(setHostHeader(host));
  const upstreamFetch = ((url: string | URL, init?: RequestInit) =>
    init?.method === 'POST' && (typeof init.body === 'string' || init.body == null)
      ? post(url, init, dispatcher, limit)
      : get(url, init, dispatcher, limit)) as unknown as FetchLike;
  return { fetch: upstreamFetch, close: () => agent.close() };
}

/** Any other request through undici's `fetch`: an SSE stream it answers has its events held to the limit. */
async function get(url: string | URL, init: RequestInit | undefined, dispatcher: Dispatcher, limit: MessageLimit): Promise<Response> {
  const response = await undiciFetch(url, { ...(init as object), dispatcher });
  if (!response.ok || response.body === null || !isEventStream(response.headers.get('content-type') ?? undefined)) return response as unknown as Response;
  const body = (response.body as ReadableStream<Uint8Array>).pipeThrough(limitSseEvents(limit, () => []));
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers as unknown as Headers });
}

/**
 * One POST through `undici.request`, answered as the `Response` the SDK reads: its status and headers
 * (`content-type`, `mcp-session-id`, `location`), and a body to cancel (202), to read as text or JSON, or
 * to stream (`text/event-stream`). Redirects are not followed (the SDK asks for `redirect: 'manual'` and
 * follows those within the origin itself).
 */
async function post(url: string | URL, init: RequestInit, dispatcher: Dispatcher, limit: MessageLimit): Promise<Response> {
  const answer = await request(url, {
    method: 'POST',
    headers: requestHeaders(init.headers),
    body: (init.body as string | null | undefined) ?? null,
    signal: init.signal ?? null,
    dispatcher,
  });
  const status = answer.statusCode;
  const headers = responseHeaders(answer.headers);
  if (status >= 200 && status < 300 && isEventStream(answer.headers['content-type'])) {
    const body = (Readable.toWeb(answer.body) as ReadableStream<Uint8Array>).pipeThrough(limitSseEvents(limit, () => requestIds(init.body)));
    return new Response(body, { status, statusText: answer.statusText, headers });
  }
  if (status === 202 || status === 204 || status === 205 || status === 304) {
    // The SDK only cancels such a body: read to its end, the connection goes back to the pool.
    answer.body.dump().catch(() => {});
    return new Response(null, { status, statusText: answer.statusText, headers });
  }
  if (status < 200 || status >= 300) return new Response(await answer.body.text(), { status, statusText: answer.statusText, headers });
  return await readJsonAnswer(answer, headers, init.body, limit);
}

/**
 * A POST's answer in one body (JSON), read as the chunks it comes in and handed on joined once; one over the
 * limit (by its `Content-Length`, or once that many bytes were read) is not read further, its connection is
 * dropped, and the SDK is answered instead with the error answer to each request of the POST.
 */
async function readJsonAnswer(answer: Dispatcher.ResponseData, headers: Headers, sent: RequestInit['body'], limit: MessageLimit): Promise<Response> {
  const declared = Number(answer.headers['content-length']);
  const { maxMessageBytes } = limit;
  const read = declared > maxMessageBytes ? { parts: [], size: declared, over: true } : await readUpTo(answer.body, maxMessageBytes);
  if (!read.over) return new Response(bodyOf(read.parts), { status: answer.statusCode, statusText: answer.statusText, headers });
  // undici's body reports its own destruction as an error ("Request aborted"): expected here, not a failure.
  answer.body.on('error', () => {}).destroy();
  // A Content-Length says the whole size; a body cut off after the limit says only that it was larger.
  const message = declared > maxMessageBytes ? { bytes: declared, complete: true } : { bytes: maxMessageBytes, complete: false };
  const ids = requestIds(sent);
  if (ids.length === 0)
    throw new Error(`it answered with ${describeSize(message)}, over its limit of ${maxMessageBytes} bytes (maxMessageBytes), a POST that sent no request`);
  const answers = ids.map((id) => tooLargeAnswer(id, message, maxMessageBytes));
  headers.set('content-type', 'application/json');
  headers.delete('content-length');
  return new Response(JSON.stringify(answers.length === 1 ? answers[0] : answers), { status: answer.statusCode, statusText: answer.statusText, headers });
}

/**
 * A body of the chunks read: one as it is, more as a stream of them, which the SDK's `json()` joins once (a
 * `Response` copies a buffer it is given: joining them here would hold a big answer three times).
 */
function bodyOf(parts: readonly Buffer[]): Buffer | ReadableStream<Uint8Array> {
  if (parts.length === 1) return parts[0] as Buffer;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

/** Reads `body` to its end, or until more than `limit` bytes came (then `over`, and what was read is let go). */
function readUpTo(body: Dispatcher.ResponseData['body'], limit: number): Promise<{ parts: Buffer[]; size: number; over: boolean }> {
  return new Promise((resolve, reject) => {
    let parts: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) {
        parts.push(chunk);
        return;
      }
      parts = [];
      body.off('data', onData);
      resolve({ parts, size, over: true });
    };
    body.on('data', onData);
    body.once('end', () => resolve({ parts, size, over: false }));
    body.once('error', reject);
  });
}

/** The ids of the requests a POST's body carries (one message, or a batch). */
function requestIds(body: RequestInit['body']): RequestId[] {
  if (typeof body !== 'string') return [];
  const sent = JSON.parse(body) as unknown;
  return (Array.isArray(sent) ? sent : [sent]).flatMap((message: { method?: unknown; id?: unknown }) =>
    typeof message.method === 'string' && (typeof message.id === 'string' || typeof message.id === 'number') ? [message.id] : [],
  );
}

/** The request's headers as `undici.request` takes them, with the defaults `fetch` would add. */
function requestHeaders(headers: RequestInit['headers']): Record<string, string> {
  const record: Record<string, string> = {};
  if (headers instanceof Headers) headers.forEach((value, key) => (record[key] = value));
  else if (Array.isArray(headers)) for (const [key, value] of headers) record[key.toLowerCase()] = value as string;
  else if (headers != null) for (const [key, value] of Object.entries(headers)) if (value !== undefined) record[key.toLowerCase()] = value;
  record.accept ??= '*/*';
  record['user-agent'] ??= 'undici';
  return record;
}

function responseHeaders(raw: Dispatcher.ResponseData['headers']): Headers {
  const headers = new Headers();
  for (const name in raw) {
    const value = raw[name];
    if (Array.isArray(value)) for (const each of value) headers.append(name, each);
    else if (value !== undefined) headers.append(name, value);
  }
  return headers;
}

function isEventStream(contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && contentType.split(';', 1)[0]?.trim().toLowerCase() === 'text/event-stream';
}

function setHostHeader(host: string): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => dispatch({ ...options, headers: { ...headersToRecord(options.headers), host } }, handler);
}

function headersToRecord(headers: Dispatcher.DispatchOptions['headers']): Record<string, string | string[]> {
  const record: Record<string, string | string[]> = {};
  const put = (key: unknown, value: unknown): void => {
    if (value != null && String(key).toLowerCase() !== 'host') record[String(key)] = value as string | string[];
  };
  if (headers == null) return record;
  if (Array.isArray(headers)) {
    for (let index = 0; index + 1 < headers.length; index += 2) put(headers[index], headers[index + 1]);
  } else if (Symbol.iterator in headers) {
    for (const [key, value] of headers as Iterable<[string, unknown]>) put(key, value);
  } else {
    for (const [key, value] of Object.entries(headers)) put(key, value);
  }
  return record;
}
