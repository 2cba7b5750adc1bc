import { A2A_PROTOCOL_VERSION, A2A_VERSION_HEADER, AgentCard } from '@a2a-js/sdk';
import { VersionNotSupportedError } from '@a2a-js/sdk/errors';
import { JsonRpcTransportHandler, ServerCallContext, type A2ARequestHandler } from '@a2a-js/sdk/server';
import type { TaskService } from '../tasks/task-service.ts';
import { buildAgentCard, type AgentCardOptions } from './agent-card.ts';
import { createA2aRequestHandler, type A2aRequestHandlerOptions } from './a2a-request-handler.ts';
import { issuerMetadataReader } from './oauth-flows.ts';

/** Options of {@link createA2aEndpoint}. */
export interface A2aEndpointOptions extends Omit<AgentCardOptions, 'url' | 'streaming' | 'pushNotifications'>, Omit<A2aRequestHandlerOptions, 'card'> {
  /**
   * The URL clients reach the JSON-RPC endpoint at, as the card names it (behind a proxy, the proxy's).
   * @default the URL the card was fetched at, with `path`
   */
  readonly url?: string;
  /** The endpoint's path, for the default `url`. @default '/a2a' */
  readonly path?: string;
  /** What reads the OAuth issuer's metadata, for the card's OAuth2 `flows`. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

/** Klym's A2A JSON-RPC endpoint over plain Fetch `Request`s and `Response`s: mount it in any HTTP framework. */
export interface A2aEndpoint {
  /** The request handler underneath (the SDK's `A2ARequestHandler`), for another transport. */
  readonly handler: A2ARequestHandler;
  /** The Agent Card as JSON (A2A §8.2), its URL `options.url`, or else derived from `requestUrl` (where the card was asked for). */
  card(requestUrl: string): Promise<unknown>;
  /**
   * Answers one JSON-RPC request (its body as text, and its headers) of `principal` (already authenticated by the caller of this method):
   * a JSON response, or an SSE stream for `SendStreamingMessage` and `SubscribeToTask`. Always HTTP 200 with
   * the spec's JSON-RPC errors: -32700 for a body that is not JSON, -32600 for one that is not a JSON-RPC
   * request, -32009 without `A2A-Version: 1.0`, -32601 for an unknown method, -32602 for wrong params.
   */
  handle(body: string, headers: Headers, principal: string): Promise<Response>;
}

type JsonRpcId = string | number | null;
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' } as const;
const rpcError = (id: JsonRpcId, code: number, message: string): Response => Response.json({ jsonrpc: '2.0', id, error: { code, message } });

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
 * framework-free `JsonRpcTransportHandler`, and the Agent Card ({@link buildAgentCard}) written from
 * `service.capabilities()` (push notifications when the service has `push`; with `security.oauth`, the
 * OAuth2 flows from the issuer's metadata, read on the first card and kept). The SDK's own HTTP adapters are Express-only; this is the part they do, for
 * Fetch: the JSON parse and request checks with the spec's codes (the SDK's transport answers -32602 for
 * both), the `A2A-Version` check, and SSE framing.
 * @example
 * ```ts
 * const a2a = createA2aEndpoint(service, { version: '0.1.0', security: { bearer: true } })
 * app.get('/.well-known/agent-card.json', async (c) => c.json(await a2a.card(c.req.url)))
 * app.post('/a2a', async (c) => a2a.handle(await c.req.text(), c.req.raw.headers, c.get('principal')))
 * ```
 */
export function createA2aEndpoint(service: TaskService, options: A2aEndpointOptions): A2aEndpoint {
  const path = options.path ?? '/a2a';
  const { oauth } = options.security ?? {};
  const issuerMetadata = oauth === undefined || oauth.metadata !== undefined ? undefined : issuerMetadataReader(oauth.issuer, options.fetch);
  const cardAt = async (requestUrl: string) => {
    const [capabilities, metadata] = await Promise.all([service.capabilities(), issuerMetadata?.()]);
    return buildAgentCard(capabilities, {
      ...options,
      url: options.url ?? new URL(path, requestUrl).href,
      streaming: true,
      pushNotifications: service.push !== undefined,
      ...(oauth === undefined || metadata === undefined ? {} : { security: { ...options.security, oauth: { ...oauth, metadata } } }),
    });
  };
  const fallbackUrl = options.url ?? `http://127.0.0.1${path}`;
  const handler = createA2aRequestHandler(service, { ...options, card: () => cardAt(fallbackUrl) });
  const transport = new JsonRpcTransportHandler(handler);

  return {
    handler,
    card: async (requestUrl) => AgentCard.toJSON(await cardAt(requestUrl)),
    async handle(text, headers, principal) {
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
          await events.return?.(undefined);
        },
      });
      return new Response(stream, { headers: SSE_HEADERS });
    },
  };
}
