import type { HttpBindings } from '@hono/node-server';
import { isKlymError, type KlymErrorCode, type TaskService } from '@klym/core';
import { TASK_TOOLS_INSTRUCTIONS, createMcp20260728TaskHandler } from '@klym/core/mcp';
import { Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { createDashboard } from '../dashboard/dashboard.ts';
import type { KlymMetrics } from '../metrics/klym-metrics.ts';
import { metricsFor, mountMetrics } from '../metrics/metrics-route.ts';
import { limitBody } from './body-limit.ts';
import { bearerAuth, hostAndOriginGuard, scopeGuard, type GuardVariables } from './guards.ts';
import { mountMcpRoutes } from './mcp-routes.ts';
import { SERVER_INFO } from './mcp-server.ts';
import { mountResourceMetadata } from './oauth-metadata.ts';
import { McpSessions } from './mcp-sessions.ts';
import { openTasks } from './open-tasks.ts';
import { requestLog } from './request-log.ts';
import { mountRestApi } from './rest-api.ts';
import { A2A_PATHS, mountA2aRoutes } from './a2a-routes.ts';
import { resolveServerOptions, type KlymServerOptions, type ResolvedServerOptions } from './server-options.ts';

/** Klym's Hono app with what it serves. */
export interface KlymApp extends AsyncDisposable {
  /** The app: mount it on `@hono/node-server`, or call `app.request()` in tests (all but legacy SSE work there). */
  readonly app: Hono<{ Bindings: Partial<HttpBindings>; Variables: GuardVariables }>;
  /** Core's task service, which the MCP tools and the REST API serve. */
  readonly service: TaskService;
  /** The options with the server's defaults applied. */
  readonly options: ResolvedServerOptions;
  /** Open MCP sessions (both transports). */
  readonly sessions: McpSessions;
  /** What `GET /metrics` serves. */
  readonly metrics: KlymMetrics;
  /**
   * Refuses new sessions, gives running tasks the grace period then cancels them, closes MCP sessions,
   * then the pool and the task store if the app opened them. Idempotent.
   */
  close(): Promise<void>;
}

const STATUS_OF: Partial<Record<KlymErrorCode, ContentfulStatusCode>> = {
  TASK_NOT_FOUND: 404,
  ARTIFACT_NOT_FOUND: 404,
  INVALID_ARGUMENT: 400,
  QUERY_FAILED: 400,
  TASK_NOT_WAITING: 409,
  SHUTTING_DOWN: 503,
  TASK_QUEUE_FULL: 429,
  QUOTA_EXCEEDED: 429,
  STORE_UNAVAILABLE: 503,
  CONFIG_INVALID: 500,
};

/**
 * Builds Klym's HTTP surface from typed options: MCP over Streamable HTTP (`/mcp`) and legacy SSE
 * (`/sse`, `/messages`), the REST API (`/api/tasks…`, `/api/quota`), `GET /healthz`, `GET /metrics` (Prometheus) and the
 * web dashboard (`/`, `/dashboard/…`, with its own login where tokens are configured), behind the
 * Host/Origin allow-lists (403), bearer auth (401: static tokens, or OAuth access tokens with their scopes,
 * 403, and `/.well-known/oauth-protected-resource`) and a body limit (413); each request is logged as one
 * line (`requestLog`). Opens the task store (`taskStore`) and the
 * pool (unless `options.pool` is given), and core's task service over them.
 *
 * @throws {KlymError} `CONFIG_INVALID` when an option is wrong; `STORE_UNAVAILABLE` when the task store cannot be opened.
 * @example
 * ```ts
 * await using klym = await createKlymApp({ upstreams: { grynya: { url: 'http://127.0.0.1:8000/sse' } } })
 * const response = await klym.app.request('/healthz')
 * ```
 */
export async function createKlymApp(options: KlymServerOptions): Promise<KlymApp> {
  const resolved = resolveServerOptions(options);
  const metrics = metricsFor(resolved);
  const tasks = await openTasks(resolved, {
    onCall: (call) => metrics.observeCall(call),
    onEvent: (event) => metrics.observeTaskEvent(event),
    onRefuse: (refusal) => metrics.observeRefusal(refusal),
  });
  const { service } = tasks;
  metrics.watch(service);
  const sessions = new McpSessions(resolved.sessionIdleMs);
  const app = new Hono<{ Bindings: Partial<HttpBindings>; Variables: GuardVariables }>();

  app.onError((error, c) => {
    if (isKlymError(error)) {
      // A refusal that a wait helps (a full queue, one's own waiting tasks) says how long, in whole seconds.
      if (error.retryAfterMs !== undefined) c.header('Retry-After', String(Math.max(1, Math.ceil(error.retryAfterMs / 1_000))));
      return c.json({ error: { code: error.code, message: error.message } }, STATUS_OF[error.code] ?? 500);
    }
    resolved.log(`klym: unexpected error serving ${c.req.method} ${c.req.path}: ${error instanceof Error ? error.message : String(error)}`, 'error');
    return c.json({ error: { code: 'INTERNAL', message: `Klym failed serving ${c.req.method} ${c.req.path}` } }, 500);
  });
  app.notFound((c) => c.json({ error: { code: 'NOT_FOUND', message: `No route ${c.req.method} ${c.req.path}` } }, 404));

  app.use('*', requestLog(resolved.log));
  app.use('*', hostAndOriginGuard(resolved));
  app.get('/healthz', async (c) => c.json(await service.health()));
  const limit = limitBody(resolved.maxBodyBytes, (c) =>
    c.json({ error: { code: 'PAYLOAD_TOO_LARGE', message: `The request body is larger than ${resolved.maxBodyBytes} bytes` } }, 413),
  );
  // One guard for every route, so an OAuth issuer's keys are fetched and cached once.
  const auth = bearerAuth(resolved);
  const scopes = scopeGuard(resolved);
  if (resolved.auth?.oauth !== undefined) mountResourceMetadata(app, resolved.auth.oauth);
  for (const path of ['/mcp', '/sse', '/messages', '/api/*', ...A2A_PATHS]) {
    app.use(path, auth);
    app.use(path, limit);
    app.use(path, scopes);
  }
  mountMetrics(app, metrics, resolved, auth);
  const mcp20260728 = createMcp20260728TaskHandler(service, {
    info: SERVER_INFO,
    instructions: TASK_TOOLS_INSTRUCTIONS,
    onerror: (error) => resolved.log(`klym: a 2026-07-28 request was refused or failed: ${error.message}`, 'debug'),
  });
  mountMcpRoutes(app, { service, sessions, mcp20260728 });
  mountRestApi(app, service);
  mountA2aRoutes(app, service, resolved);
  app.route('/', createDashboard({ service, store: tasks.store, options: resolved, callTotals: () => metrics.callTotals() }));

  let closing: Promise<void> | undefined;
  const klym: KlymApp = {
    app,
    service,
    options: resolved,
    sessions,
    metrics,
    close() {
      closing ??= (async () => {
        sessions.stopAccepting();
        // Tasks first (their grace period needs open sessions to poll), then sessions and listen streams, then what tasks ran on.
        const failures: unknown[] = [];
        for (const step of [() => service.close(), () => sessions.close(), () => mcp20260728.close(), () => tasks.close()])
          await step().catch((error: unknown) => void failures.push(error));
        if (failures.length > 0) throw new AggregateError(failures, 'Klym could not shut down cleanly');
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => klym.close(),
  };
  return klym;
}
