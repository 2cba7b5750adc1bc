import { isPlainObject } from '../config/layers.ts';
import { ProtocolErrorCode, specTypeSchemas, type JSONRPCErrorResponse, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/server';

const { CallToolRequest, InitializeRequest, JSONRPCMessage: JSONRPCMessageSchema, ListToolsRequest, SetLevelRequest } = specTypeSchemas;

// What the SDK leaves to its defaults, answered the way JSON-RPC 2.0 names it: valid JSON that is no
// JSON-RPC message is -32600 Invalid Request (the SDK says -32700 Parse error), so is an empty batch (the
// SDK answers 202 with no body), and a request whose params do not fit its method is -32602 Invalid params
// naming the field (the SDK answers -32603 Internal error with zod's issue list).

/** A JSON-RPC error answer that names no request (`id: null`): the request's id could not be trusted. */
export function rpcErrorBody(code: number, message: string): JSONRPCErrorResponse {
  return { jsonrpc: '2.0', error: { code, message }, id: null } as unknown as JSONRPCErrorResponse;
}

const kindOf = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value);

/** Why `value` is not one JSON-RPC 2.0 message (a request, notification or response), in words naming the field; `undefined` when it is one. */
function messageFault(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `expected a JSON-RPC 2.0 message object, got ${kindOf(value)}`;
  const message = value as Record<string, unknown>;
  if (message.jsonrpc !== '2.0') return '`jsonrpc` must be "2.0"';
  if ('method' in message && typeof message.method !== 'string') return '`method` must be a string';
  if ('id' in message && typeof message.id !== 'string' && !Number.isInteger(message.id) && !('error' in message && message.id === null)) {
    return '`id` must be a string or an integer';
  }
  if (!('method' in message) && !('result' in message) && !('error' in message))
    return 'a message needs `method` (a request or notification) or `result`/`error` (a response)';
  if ('params' in message && (typeof message.params !== 'object' || message.params === null || Array.isArray(message.params)))
    return '`params` must be an object';
  // The SDK's own schema has the last word, so nothing passes here that its transport would refuse. A request or
  // notification without `_meta` has met every rule that schema has for it above: the parse (a tenth of a
  // poll's CPU) is left to the messages that carry more: responses, and `_meta` with its typed keys.
  if ('method' in message && !hasMeta(message)) return undefined;
  return issuesOf(JSONRPCMessageSchema, value).length === 0 ? undefined : 'not a JSON-RPC 2.0 request, notification or response';
}

/** Whether a message's params carry `_meta`, whose keys the SDK's schemas type. */
const hasMeta = (message: Record<string, unknown>): boolean => isPlainObject(message.params) && message.params['_meta'] !== undefined;

const invalid = (why: string): JSONRPCErrorResponse => rpcErrorBody(ProtocolErrorCode.InvalidRequest, `Invalid Request: ${why}`);

/**
 * Checks a POST body that parsed as JSON: one JSON-RPC 2.0 message, or a non-empty batch of them.
 * Answers the `-32600 Invalid Request` error body to send (HTTP 400) when it is not, naming what is wrong
 * (a batch with a bad element is refused whole, naming the first one); `undefined` when it is.
 */
export function envelopeError(body: unknown): JSONRPCErrorResponse | undefined {
  if (Array.isArray(body)) {
    if (body.length === 0) return invalid('an empty batch; JSON-RPC 2.0 needs at least one message');
    for (const [index, item] of body.entries()) {
      const fault = messageFault(item);
      if (fault !== undefined) return invalid(`batch item ${index}: ${fault}`);
    }
    return undefined;
  }
  const fault = messageFault(body);
  return fault === undefined ? undefined : invalid(fault);
}

/** A Standard Schema's issues with `value`, none when it fits (the SDK's spec schemas validate synchronously). */
type SpecSchema = (typeof specTypeSchemas)[keyof typeof specTypeSchemas];
function issuesOf(
  schema: SpecSchema,
  value: unknown,
): readonly { readonly message: string; readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[] | undefined }[] {
  const outcome = schema['~standard'].validate(value) as { issues?: readonly { message: string; path?: readonly (PropertyKey | { key: PropertyKey })[] }[] };
  return outcome.issues ?? [];
}

/** The params schema of each method Klym's MCP server answers (the SDK's own, which its handlers parse with). */
const REQUEST_SCHEMAS: Readonly<Record<string, SpecSchema>> = {
  initialize: InitializeRequest,
  'tools/list': ListToolsRequest,
  'tools/call': CallToolRequest,
  'logging/setLevel': SetLevelRequest,
};

/** A zod issue's message as a caller reads it: `missing` for an absent field, `object` for zod's `record`. */
const inWords = (message: string): string =>
  message
    .replace(/^Invalid input: /, '')
    .replace(/^expected (.+), received undefined$/, 'missing (expected $1)')
    .replace(/\brecord\b/, 'object');

/**
 * Whether a `tools/call` (Grynya's every poll) plainly fits its schema: a string `name`, object `arguments`
 * or none, and nothing else the schema types (`_meta`, `task`). Only a call that does not is parsed.
 */
function plainToolCall(message: Record<string, unknown>): boolean {
  const { params } = message;
  if (!isPlainObject(params) || typeof params['name'] !== 'string') return false;
  if (params['arguments'] !== undefined && !isPlainObject(params['arguments'])) return false;
  return params['_meta'] === undefined && params['task'] === undefined;
}

/** The `-32602 Invalid params` answer to `message` when it is a request whose params do not fit its method; else `undefined`. */
export function paramsError(message: JSONRPCMessage): JSONRPCErrorResponse | undefined {
  if (!('method' in message) || !('id' in message)) return undefined;
  if (message.method === 'tools/call' && plainToolCall(message as Record<string, unknown>)) return undefined;
  const schema = REQUEST_SCHEMAS[message.method];
  const issues = schema === undefined ? [] : issuesOf(schema, message);
  if (issues.length === 0) return undefined;
  const faults = issues
    .slice(0, 3)
    .map((issue) => `\`${(issue.path ?? []).map((part) => String(typeof part === 'object' ? part.key : part)).join('.')}\`: ${inWords(issue.message)}`);
  return {
    jsonrpc: '2.0',
    id: message.id,
    error: { code: ProtocolErrorCode.InvalidParams, message: `Invalid params for ${message.method}: ${faults.join('; ') || 'they do not fit the method'}` },
  };
}

/**
 * Answers, on `transport` itself, every request whose params do not fit its method with `-32602 Invalid
 * params` naming the field, so the server never sees it; everything else goes on to the server. The answer
 * travels as any response would (the request's SSE stream or JSON body, the legacy SSE stream, stdout).
 * Call it after `server.connect(transport)`, which installs the `onmessage` this wraps.
 */
export function refuseInvalidParams(transport: Transport): void {
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const refusal = paramsError(message);
    if (refusal === undefined) {
      deliver?.(message, extra);
      return;
    }
    transport.send(refusal).catch(() => {
      // The client went away before its answer: there is nobody left to tell.
    });
  };
}
