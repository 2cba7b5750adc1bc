// Every reach of Klym into a private field of the MCP SDK, in one file: each is checked when the object it
// reaches into is built, and fails loudly, naming the installed SDK's version, should an SDK update move it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { McpServer } from '@modelcontextprotocol/server';
import { KlymError } from '../errors.ts';

/** The installed version of the package `name` (`2.4.0`), or `of an unknown version`: for the errors below. */
export function installedVersionOf(name: string): string {
  let directory: string;
  try {
    directory = path.dirname(createRequire(import.meta.url).resolve(name));
  } catch {
    return 'of an unknown version';
  }
  // The SDK's `exports` do not list its package.json: walk up from its entry point to it.
  for (let parent = path.dirname(directory); directory !== parent; directory = parent, parent = path.dirname(directory)) {
    const manifest = readManifest(path.join(directory, 'package.json'));
    if (manifest?.name === name && typeof manifest.version === 'string') return manifest.version;
  }
  return 'of an unknown version';
}

function readManifest(file: string): { readonly name?: unknown; readonly version?: unknown } | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
  } catch {
    return undefined; // none here (a `dist/`), or not JSON: look further up
  }
}

const REACHES_FILE = 'packages/core/src/internal/sdk-handlers.ts';

/** The error a moved private field gets: which SDK, which version, and which file to update. */
const moved = (sdk: string, what: string): KlymError =>
  new KlymError('INTERNAL', `${what} in ${sdk} ${installedVersionOf(sdk)}, which Klym was not built for: update ${REACHES_FILE}`);

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
  if (!(handlers instanceof Map))
    throw moved('@modelcontextprotocol/server', "The MCP SDK's Server keeps its request handlers elsewhere than `_requestHandlers`");
  return handlers;
}

/** What `StdioClientTransport` reads its child's stdout through: the SDK's `ReadBuffer`, or Klym's `StdioFrameReader`. */
export interface StdioReadBuffer {
  append(chunk: Buffer): void;
  readMessage(): unknown;
  clear(): void;
}

const isReadBuffer = (value: unknown): value is StdioReadBuffer =>
  typeof value === 'object' && value !== null && ['append', 'readMessage', 'clear'].every((method) => typeof Reflect.get(value, method) === 'function');

/**
 * Puts `reader` in the place of the `ReadBuffer` that a just-built `StdioClientTransport` of the v2 SDK reads its
 * child's stdout through (`_readBuffer`, private): the SDK's joins its whole buffer with each chunk and, past its
 * limit, throws, which loses the session (see `pool/stdio-frame-reader.ts`).
 * @throws {KlymError} `INTERNAL` naming the SDK's version, when `transport` has no such field: an SDK that reads
 * otherwise would take oversized frames with its own buffer again, and lose sessions to them, quietly.
 */
export function replaceStdioReadBuffer(transport: object, reader: StdioReadBuffer): void {
  if (!isReadBuffer(Reflect.get(transport, '_readBuffer'))) {
    throw moved('@modelcontextprotocol/client', "The MCP SDK's StdioClientTransport reads its child's stdout otherwise than through `_readBuffer`");
  }
  Reflect.set(transport, '_readBuffer', reader);
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
  // Set as it is: the handler it wraps is the SDK's own, which checks the request and the result already.
  // Through `setRequestHandler` each call's request was parsed twice more and its result once more (#42).
  replaceHandler(server, 'tools/call', async (request, ctx) =>
    names.has(request.params.name) ? tools(request, ctx) : { isError: true, content: [{ type: 'text', text: `Tool ${request.params.name} not found` }] },
  );
}
