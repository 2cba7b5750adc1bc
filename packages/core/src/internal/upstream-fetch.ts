import { Readable } from 'node:stream';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { Agent, fetch as undiciFetch, request, type Dispatcher } from 'undici';

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
 */
export function createUpstreamFetch(host: string | undefined): UpstreamFetch {
  const agent = new Agent();
  const dispatcher: Dispatcher = host === undefined ? agent : agent.compose(setHostHeader(host));
  const upstreamFetch = ((url: string | URL, init?: RequestInit) =>
    init?.method === 'POST' && (typeof init.body === 'string' || init.body == null)
      ? post(url, init, dispatcher)
      : undiciFetch(url, { ...(init as object), dispatcher })) as unknown as FetchLike;
  return { fetch: upstreamFetch, close: () => agent.close() };
}

/**
 * One POST through `undici.request`, answered as the `Response` the SDK reads: its status and headers
 * (`content-type`, `mcp-session-id`, `location`), and a body to cancel (202), to read as text or JSON, or
 * to stream (`text/event-stream`). Redirects are not followed (the SDK asks for `redirect: 'manual'` and
 * follows those within the origin itself).
 */
async function post(url: string | URL, init: RequestInit, dispatcher: Dispatcher): Promise<Response> {
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
    return new Response(Readable.toWeb(answer.body) as ReadableStream<Uint8Array>, { status, statusText: answer.statusText, headers });
  }
  if (status === 202 || status === 204 || status === 205 || status === 304) {
    // The SDK only cancels such a body: read to its end, the connection goes back to the pool.
    answer.body.dump().catch(() => {});
    return new Response(null, { status, statusText: answer.statusText, headers });
  }
  return new Response(await answer.body.text(), { status, statusText: answer.statusText, headers });
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
  return (dispatch) => (options, handler) =>
    dispatch({ ...options, headers: { ...headersToRecord(options.headers), host } }, handler);
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
