import type { McpServer } from '@modelcontextprotocol/server';

/** A request handler as the v2 SDK's `Server` keeps it. */
export type SdkRequestHandler = (request: { params: { name: string; arguments?: unknown; task?: unknown; _meta?: unknown } }, ctx: never) => Promise<unknown>;

/**
 * The handler map of `server`'s low-level `Server`: private in the v2 SDK, reached here and only here, for the
 * answers the SDK's own `tools/call` will not give (a 2025-11-25 `CreateTaskResult`, a tool's JSON-RPC
 * error). Should a later SDK keep its handlers elsewhere, this throws as the server is built, so the suite
 * says so at once instead of the answers changing quietly.
 */
function handlersOf(server: McpServer): Map<string, SdkRequestHandler> {
  const handlers = (server.server as unknown as Record<string, Map<string, SdkRequestHandler> | undefined>)['_requestHandlers'];
  if (!(handlers instanceof Map)) throw new Error("The MCP SDK's Server keeps its request handlers elsewhere than _requestHandlers: update packages/core/src/mcp/sdk-handlers.ts");
  return handlers;
}

/** The handler `server` answers `method` with now (the SDK's own `tools/call` once a tool is registered). */
export function currentHandler(server: McpServer, method: string): SdkRequestHandler {
  const handler = handlersOf(server).get(method);
  if (handler === undefined) throw new Error(`The MCP server has no ${method} handler yet: register its tools first`);
  return handler;
}

/** Answers `method` with `handler` exactly as it answers: unlike `setRequestHandler`, the SDK does not check the answer's shape. */
export function replaceHandler(server: McpServer, method: string, handler: SdkRequestHandler): void {
  handlersOf(server).set(method, handler);
}

/**
 * Answers a `tools/call` of a tool `server` does not have with an `isError` result naming it, as the 1.x SDK
 * did, where the v2 SDK answers the JSON-RPC error `-32602`. For Klym's 2025-11-25 sessions, whose clients keep
 * what they got before the move to the v2 SDK; 2026-07-28 requests get the v2 SDK's error. Call it after
 * registering the tools.
 */
export function answerUnknownToolsAsToolErrors(server: McpServer, known: readonly string[]): void {
  const names = new Set(known);
  const tools = currentHandler(server, 'tools/call');
  server.server.setRequestHandler('tools/call', (request, ctx) =>
    (names.has(request.params.name) ? tools(request, ctx as never) : Promise.resolve({ isError: true, content: [{ type: 'text', text: `Tool ${request.params.name} not found` }] })) as never,
  );
}
