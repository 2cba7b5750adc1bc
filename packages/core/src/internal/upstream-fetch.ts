import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { Agent, fetch as undiciFetch, type Dispatcher } from 'undici';

/** A `fetch` for one upstream, with its own connection pool, and the means to close it. */
export interface UpstreamFetch {
  readonly fetch: FetchLike;
  close(): Promise<void>;
}

/**
 * Builds the `fetch` the SDK transports use for one upstream. Node's global `fetch` silently drops a
 * `Host` header, and grynya-mcp-server answers 421 to a Host outside its allow-list; so the Host header
 * (if any) is set below fetch, by an undici dispatcher interceptor, where it is really sent.
 */
export function createUpstreamFetch(host: string | undefined): UpstreamFetch {
  const agent = new Agent();
  const dispatcher: Dispatcher = host === undefined ? agent : agent.compose(setHostHeader(host));
  const upstreamFetch = ((url: string | URL, init?: RequestInit) =>
    undiciFetch(url, { ...(init as object), dispatcher })) as unknown as FetchLike;
  return { fetch: upstreamFetch, close: () => agent.close() };
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
