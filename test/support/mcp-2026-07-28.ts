// Raw protocol revision 2026-07-28 requests, for the tests where the wire is the point: the per-request `_meta`
// envelope, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, and SSE answers read event by event.

/** Options of {@link mcp20260728Post}. */
export interface Mcp20260728PostOptions {
  /** Declare the Tasks extension in the request's client capabilities. @default true */
  readonly extension?: boolean;
  /** More client capabilities to declare beside the extension (`{ elicitation: { form: {} } }`). @default none */
  readonly capabilities?: Readonly<Record<string, unknown>>;
  /** Put the envelope in `params._meta`. @default true */
  readonly envelope?: boolean;
  /** The revision the envelope and the header name. @default '2026-07-28' */
  readonly protocolVersion?: string;
  /** More headers, or ones that override the derived ones. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** Posts one JSON-RPC message as a 2026-07-28 client would, with `token` as its bearer. */
export async function mcp20260728Post(
  url: string,
  token: string | undefined,
  message: { method: string; params?: Record<string, unknown>; [key: string]: unknown },
  options: Mcp20260728PostOptions = {},
): Promise<Response> {
  const version = options.protocolVersion ?? '2026-07-28';
  const params = message.params ?? {};
  const envelope = {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-2026-client', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': {
      ...options.capabilities,
      ...(options.extension === false ? {} : { extensions: { 'io.modelcontextprotocol/tasks': {} } }),
    },
  };
  const body = { ...message, params: options.envelope === false ? params : { ...params, _meta: { ...(params['_meta'] as object | undefined), ...envelope } } };
  const name = typeof params.name === 'string' ? params.name : typeof params.taskId === 'string' ? params.taskId : undefined;
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': version,
      'mcp-method': message.method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...options.headers,
    },
    body: JSON.stringify(body),
  });
}

/** A JSON-RPC answer as the test reads it. */
export interface Mcp20260728Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly result: Record<string, unknown> | undefined;
  readonly error: { code: number; message: string; data?: unknown } | undefined;
}

let nextId = 1;

/** Calls `method` with `params` and reads its one answer (a JSON body, or the last message of an SSE one). */
export async function mcp20260728Call(
  url: string,
  token: string,
  method: string,
  params: Record<string, unknown>,
  options: Mcp20260728PostOptions = {},
): Promise<Mcp20260728Answer> {
  const response = await mcp20260728Post(url, token, { jsonrpc: '2.0', id: nextId++, method, params }, options);
  const body = response.headers.get('content-type')?.startsWith('text/event-stream')
    ? ((await readEvents(response, 10_000)).at(-1) ?? {})
    : ((await response.json()) as Record<string, unknown>);
  return { status: response.status, body, result: body.result as Mcp20260728Answer['result'], error: body.error as Mcp20260728Answer['error'] };
}

/** Every JSON-RPC message of an SSE answer, until the stream ends (or `timeoutMs`, then it throws). */
export async function readEvents(response: Response, timeoutMs: number): Promise<Record<string, unknown>[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const timer = setTimeout(() => void reader.cancel(new Error(`The SSE stream did not end within ${timeoutMs} ms`)), timeoutMs);
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    clearTimeout(timer);
  }
  return text
    .split('\n\n')
    .flatMap((frame) => frame.split('\n').filter((line) => line.startsWith('data: ')))
    .map((line) => JSON.parse(line.slice('data: '.length)) as Record<string, unknown>);
}

/** The task id of a `run_agent_task` answer: the flat task handle's `taskId`. */
export function taskIdOf(answer: Mcp20260728Answer): string {
  const taskId = (answer.result as { taskId?: unknown } | undefined)?.taskId;
  if (typeof taskId !== 'string') throw new Error(`Expected a task handle, got ${JSON.stringify(answer.body)}`);
  return taskId;
}
