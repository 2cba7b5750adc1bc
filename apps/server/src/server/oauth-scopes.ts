import type { KlymOperation } from './oauth-options.ts';

/** The tools that start a run (a reply sets a waiting run going again), and the one that cancels; every other tool of Klym's reads. */
const STARTING_TOOLS = new Set(['start_async_agent_task', 'run_agent_task', 'reply_to_agent_task']);
const CANCELLING_TOOLS = new Set(['cancel_agent_task']);

/**
 * JSON-RPC methods that touch no task: the protocol's own plumbing (a session, its streams, the tool list).
 * A caller needs a valid token for them, and no scope, so a client holding only `start` can still connect.
 */
const PLUMBING = new Set(['initialize', 'ping', 'tools/list', 'logging/setLevel', 'server/discover', 'completion/complete']);

/** A2A 1.0 JSON-RPC methods (`POST /a2a`) and what each needs; any other reads at most. */
const A2A_OPERATIONS: Readonly<Record<string, KlymOperation>> = {
  SendMessage: 'start',
  SendStreamingMessage: 'start',
  CancelTask: 'cancel',
  // A push config sends the task's results to a URL of the caller's choosing, as a start's webhook does.
  CreateTaskPushNotificationConfig: 'start',
  DeleteTaskPushNotificationConfig: 'start',
};

/** Whether `path` is the A2A endpoint's: `/a2a`, or `/a2a/` (where the conformance kit posts). */
const isA2aPath = (path: string): boolean => path === '/a2a' || path === '/a2a/';

/** What one A2A JSON-RPC request needs: `GetTask`, `ListTasks`, `SubscribeToTask`, reading push configs, `GetExtendedAgentCard`, and the rest read. */
function operationOfA2a(message: unknown): KlymOperation {
  const method = typeof message === 'object' && message !== null && 'method' in message ? message.method : undefined;
  return (typeof method === 'string' ? A2A_OPERATIONS[method] : undefined) ?? 'read';
}

/** What one JSON-RPC message needs. */
function operationOfMessage(message: unknown): KlymOperation | undefined {
  if (typeof message !== 'object' || message === null || !('method' in message) || typeof message.method !== 'string') return undefined; // a response to the server's request
  const { method } = message;
  if (method === 'tools/call') {
    const name =
      'params' in message && typeof message.params === 'object' && message.params !== null && 'name' in message.params ? message.params.name : undefined;
    if (typeof name === 'string' && STARTING_TOOLS.has(name)) return 'start';
    if (typeof name === 'string' && CANCELLING_TOOLS.has(name)) return 'cancel';
    return 'read';
  }
  if (method === 'tasks/cancel') return 'cancel';
  // A listen naming tasks streams their states and results; one for list changes only is plumbing.
  if (method === 'subscriptions/listen') {
    const notifications =
      'params' in message && typeof message.params === 'object' && message.params !== null && 'notifications' in message.params
        ? message.params.notifications
        : undefined;
    return typeof notifications === 'object' && notifications !== null && 'taskIds' in notifications ? 'read' : undefined;
  }
  // `tasks/update` hands a running task its input: it drives a run, as a start does.
  if (method === 'tasks/update') return 'start';
  if (PLUMBING.has(method) || method.startsWith('notifications/')) return undefined;
  // `tasks/get`, `tasks/result`, `tasks/list`, and whatever a later protocol adds: reading is the least a method may need.
  return 'read';
}

/**
 * The operations (`start`, `read`, `cancel`) a request to Klym needs its access token to grant: the one
 * place that maps Klym's routes, MCP methods and tools to scopes. `body` is the request's parsed JSON, for
 * MCP's `POST /mcp` and `POST /messages` and A2A's `POST /a2a` (a batch needs what each of its messages needs); other routes are
 * decided by method and path. An empty list: any valid token will do.
 */
export function operationsOf(method: string, path: string, body?: unknown): KlymOperation[] {
  if (path === '/mcp' || path === '/messages') {
    if (method !== 'POST') return []; // the session's stream (GET) and its end (DELETE)
    const needed = (Array.isArray(body) ? body : [body]).map(operationOfMessage);
    return [...new Set(needed.filter((operation) => operation !== undefined))];
  }
  if (path === '/sse') return [];
  if (isA2aPath(path)) return method === 'POST' ? [operationOfA2a(body)] : [];
  if (method === 'POST' && path === '/api/tasks') return ['start'];
  if (method === 'POST' && /^\/api\/tasks\/[^/]+\/reply$/.test(path)) return ['start'];
  if (method === 'POST' && /^\/api\/tasks\/[^/]+\/cancel$/.test(path)) return ['cancel'];
  return ['read']; // the rest of the REST API, /metrics
}

/** Whether {@link operationsOf} needs the request's JSON body to decide. */
export function needsBody(method: string, path: string): boolean {
  return method === 'POST' && (path === '/mcp' || path === '/messages' || isA2aPath(path));
}
