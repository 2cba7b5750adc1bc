import { createHash } from 'node:crypto';
import { A2A_PROTOCOL_VERSION, A2A_VERSION_HEADER, AgentCard } from '@a2a-js/sdk';
import { ContentTypeNotSupportedError, VersionNotSupportedError } from '@a2a-js/sdk/errors';
import { JsonRpcTransportHandler, ServerCallContext, type A2ARequestHandler } from '@a2a-js/sdk/server';
import type { TaskService } from '../tasks/task-service.ts';
import { buildAgentCard, buildExtendedAgentCard, type AgentCardOptions } from './agent-card.ts';
import { createA2aRequestHandler, STREAM_SIGNAL_STATE, type A2aRequestHandlerOptions } from './a2a-request-handler.ts';
import { issuerMetadataReader } from './oauth-flows.ts';

/** Options of {@link createA2aEndpoint}. */
export interface A2aEndpointOptions
  extends Omit<AgentCardOptions, 'url' | 'streaming' | 'pushNotifications'>, Omit<A2aRequestHandlerOptions, 'card' | 'extendedCard'> {
  /**
   * The URL clients reach the JSON-RPC endpoint at, as the card names it (behind a proxy, the proxy's).
   * @default the URL the card was fetched at, with `path`
   */
  readonly url?: string;
  /** The endpoint's path, for the default `url`. @default '/a2a' */
  readonly path?: string;
  /** What reads the OAuth issuer's metadata, for the card's OAuth2 `flows`. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /** How long clients and caches may keep the public card, in seconds (`Cache-Control: public, max-age`); 0: `no-cache`. @default 3600 */
  readonly cardMaxAgeSeconds?: number;
}

/** Klym's A2A JSON-RPC endpoint over plain Fetch `Request`s and `Response`s: mount it in any HTTP framework. */
export interface A2aEndpoint {
  /** The request handler underneath (the SDK's `A2ARequestHandler`), for another transport. */
  readonly handler: A2ARequestHandler;
  /**
   * The public Agent Card as JSON (A2A §8.2: Klym, its skill, its interface and security schemes; no inventory), its
   * URL `options.url`, or else derived from `requestUrl` (where the card was asked for).
   */
  card(requestUrl: string): Promise<unknown>;
  /**
   * The public card as the HTTP answer to `GET /.well-known/agent-card.json` at `requestUrl` (A2A §8.6.1): with
   * `Cache-Control` (`public, max-age=` {@link A2aEndpointOptions.cardMaxAgeSeconds}), a weak `ETag` of its body and
   * `Last-Modified` (when the endpoint was made); 304 without a body when `headers`' `If-None-Match` names that ETag.
   */
  cardResponse(requestUrl: string, headers: Headers): Promise<Response>;
  /**
   * Answers one JSON-RPC request (its body as text, and its headers) of `principal` (already authenticated by the caller of this method):
   * a JSON response, or an SSE stream for `SendStreamingMessage` and `SubscribeToTask`. Always HTTP 200 with
   * the spec's JSON-RPC errors: -32005 for a `Content-Type` that is not JSON, -32700 for a body that is not JSON, -32600 for one that is not a JSON-RPC
   * request, -32009 without `A2A-Version: 1.0`, -32601 for an unknown method, -32602 for wrong params.
   * `GetExtendedAgentCard` answers the extended card (the inventory: models, upstreams, tools, policies, limits),
   * its interface URL `options.url`, or else derived from `requestUrl` (where the request was posted).
   */
  handle(body: string, headers: Headers, principal: string, requestUrl?: string): Promise<Response>;
}

type JsonRpcId = string | number | null;
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' } as const;
const rpcError = (id: JsonRpcId, code: number, message: string): Response => Response.json({ jsonrpc: '2.0', id, error: { code, message } });

/** Where the request handler finds the URL a JSON-RPC request was posted to (the SDK's context `state`), for the extended card's interface. */
const REQUEST_URL_STATE = 'klym.requestUrl';

/** An entity tag without its weakness: `W/"x"` and `"x"` compare equal in the weak comparison. */
const opaqueTag = (tag: string): string => tag.trim().replace(/^W\//, '');

/** Whether an `If-None-Match` value names `etag`, by the weak comparison GET uses (RFC 9110 §13.1.2), or is `*`. */
function matchesEtag(ifNoneMatch: string | null, etag: string): boolean {
  if (ifNoneMatch === null) return false;
  return ifNoneMatch.split(',').some((tag) => tag.trim() === '*' || opaqueTag(tag) === opaqueTag(etag));
}

/** Whether a `Content-Type` names JSON (`application/json`, or a `+json` type such as `application/a2a+json`), whatever its parameters. */
function isJsonMediaType(contentType: string): boolean {
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** A JSON-RPC 2.0 request's id, or `undefined` when `body` is not a request. */
function requestIdOf(body: unknown): JsonRpcId | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { jsonrpc, method, id } = body as Record<string, unknown>;
  if (jsonrpc !== '2.0' || typeof method !== 'string' || method === '') return undefined;
  if (id === undefined || id === null || typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id))) return id ?? null;
  return undefined;
}

/**
 * Klym's A2A endpoint: the request handler over `service` ({@link createA2aRequestHandler}) behind the SDK's
 * framework-free `JsonRpcTransportHandler`; the public Agent Card ({@link buildAgentCard}: push notifications when
 * the service has `push`; with `security.oauth`, the OAuth2 flows from the issuer's metadata, read on the first card
 * and kept), served with cache headers; and the extended card ({@link buildExtendedAgentCard}), written from
 * `service.capabilities()` for each `GetExtendedAgentCard` of an authenticated caller. The SDK's own HTTP adapters are Express-only; this is the part they do, for
 * Fetch: the JSON parse and request checks with the spec's codes (the SDK's transport answers -32602 for
 * both), the `A2A-Version` check, and SSE framing.
 * @example
 * ```ts
 * const a2a = createA2aEndpoint(service, { version: '0.1.0', security: { bearer: true } })
 * app.get('/.well-known/agent-card.json', async (c) => a2a.cardResponse(c.req.url, c.req.raw.headers))
 * app.post('/a2a', async (c) => a2a.handle(await c.req.text(), c.req.raw.headers, c.get('principal'), c.req.url))
 * ```
 */
export function createA2aEndpoint(service: TaskService, options: A2aEndpointOptions): A2aEndpoint {
  const path = options.path ?? '/a2a';
  const { oauth } = options.security ?? {};
  const issuerMetadata = oauth === undefined || oauth.metadata !== undefined ? undefined : issuerMetadataReader(oauth.issuer, options.fetch);
  const cardOptionsAt = async (requestUrl: string): Promise<AgentCardOptions> => {
    const metadata = await issuerMetadata?.();
    return {
      ...options,
      url: options.url ?? new URL(path, requestUrl).href,
      streaming: true,
      pushNotifications: service.push !== undefined,
      ...(oauth === undefined || metadata === undefined ? {} : { security: { ...options.security, oauth: { ...oauth, metadata } } }),
    };
  };
  const cardAt = async (requestUrl: string) => buildAgentCard(await cardOptionsAt(requestUrl));
  const fallbackUrl = options.url ?? `http://127.0.0.1${path}`;
  const handler = createA2aRequestHandler(service, {
    ...options,
    card: () => cardAt(fallbackUrl),
    extendedCard: async (context) => {
      const requestUrl = context.state.get(REQUEST_URL_STATE);
      const [capabilities, cardOptions] = await Promise.all([service.capabilities(), cardOptionsAt(typeof requestUrl === 'string' ? requestUrl : fallbackUrl)]);
      return buildExtendedAgentCard(capabilities, cardOptions);
    },
  });
  const transport = new JsonRpcTransportHandler(handler);
  const maxAgeSeconds = options.cardMaxAgeSeconds ?? 3_600;
  if (!Number.isInteger(maxAgeSeconds) || maxAgeSeconds < 0)
    throw new TypeError(`Expected \`cardMaxAgeSeconds\` to be a non-negative integer, got ${maxAgeSeconds}`);
  // The card is written from options fixed here (and the issuer's metadata, read once): it changes only with the request's origin.
  const lastModified = new Date().toUTCString();

  return {
    handler,
    card: async (requestUrl) => AgentCard.toJSON(await cardAt(requestUrl)),
    async cardResponse(requestUrl, headers) {
      const body = JSON.stringify(AgentCard.toJSON(await cardAt(requestUrl)));
      const etag = `W/"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`;
      const cacheHeaders = {
        etag,
        'last-modified': lastModified,
        'cache-control': maxAgeSeconds > 0 ? `public, max-age=${maxAgeSeconds}` : 'no-cache',
      };
      if (matchesEtag(headers.get('if-none-match'), etag)) return new Response(null, { status: 304, headers: cacheHeaders });
      return new Response(body, { headers: { ...cacheHeaders, 'content-type': 'application/json' } });
    },
    async handle(text, headers, principal, requestUrl) {
      // A2A §9.1: requests are `application/json`. Another declared type is refused by name, as the SDK's own server does;
      // a request without one is read as JSON.
      const contentType = headers.get('content-type');
      if (contentType !== null && !isJsonMediaType(contentType)) {
        const refusal = new ContentTypeNotSupportedError(`Content-Type ${JSON.stringify(contentType)} is not supported: send application/json (A2A §9.1)`);
        return Response.json({ jsonrpc: '2.0', id: null, error: JsonRpcTransportHandler.mapToJSONRPCError(refusal) });
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch (error) {
        return rpcError(null, -32700, `Parse error: ${error instanceof Error ? error.message : 'the body is not JSON'}`);
      }
      const id = requestIdOf(body);
      if (id === undefined) return rpcError(null, -32600, 'Invalid Request: expected a JSON-RPC 2.0 request object ({ jsonrpc: "2.0", method, id, params })');
      const version = headers.get(A2A_VERSION_HEADER) ?? undefined;
      if (version !== A2A_PROTOCOL_VERSION) {
        const refusal = new VersionNotSupportedError(
          `A2A protocol version ${version === undefined ? '(none: send the A2A-Version header)' : `'${version}'`} is not supported; Klym speaks ${A2A_PROTOCOL_VERSION}`,
        );
        return Response.json({ jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(refusal) });
      }
      const context = new ServerCallContext({ user: { isAuthenticated: true, userName: principal }, requestedVersion: version });
      if (requestUrl !== undefined) context.state.set(REQUEST_URL_STATE, requestUrl);
      // Aborted when the client goes (or the server closes the connection): the stream's watch ends then, not with its task.
      const streamEnd = new AbortController();
      context.state.set(STREAM_SIGNAL_STATE, streamEnd.signal);
      const answer = await transport.handle(body as Record<string, unknown>, context);
      if (!(Symbol.asyncIterator in answer)) return Response.json(answer);
      const events = answer[Symbol.asyncIterator]();
      let first: IteratorResult<unknown>;
      try {
        first = await events.next();
      } catch (error) {
        // Refused before anything was sent (an unknown task, a bad message): a plain JSON-RPC error, as for any method.
        return Response.json({ jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) });
      }
      const encoder = new TextEncoder();
      const frame = (event: unknown, type?: string): Uint8Array =>
        encoder.encode(`${type === undefined ? '' : `event: ${type}\n`}data: ${JSON.stringify(event)}\n\n`);
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          if (first.done !== true) controller.enqueue(frame(first.value));
          else controller.close();
        },
        async pull(controller) {
          try {
            const next = await events.next();
            if (next.done === true) controller.close();
            else controller.enqueue(frame(next.value));
          } catch (error) {
            controller.enqueue(frame({ jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) }, 'error'));
            controller.close();
          }
        },
        async cancel() {
          streamEnd.abort();
          await events.return?.(undefined);
        },
      });
      return new Response(stream, { headers: SSE_HEADERS });
    },
  };
}
