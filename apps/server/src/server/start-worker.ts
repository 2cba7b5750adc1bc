import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { serve, type HttpBindings } from '@hono/node-server';
import { KlymError, type TaskService } from '@klym/core';
import { Hono } from 'hono';
import { metricsFor, mountMetrics } from '../metrics/metrics-route.ts';
import { hostAndOriginGuard, type GuardVariables } from './guards.ts';
import { requestLog } from './request-log.ts';
import { openTasks } from './open-tasks.ts';
import { SERVER_DEFAULTS, resolveServerOptions, type KlymServerOptions } from './server-options.ts';

/** A running `klym worker`: it runs tasks from the shared queue, and answers `GET /healthz` and `GET /metrics`. */
export interface RunningKlymWorker extends AsyncDisposable {
  /** `http://<host>:<port>` of its health endpoint. */
  readonly url: string;
  readonly port: number;
  /** The task service whose manager takes the queue's tasks (nothing is served over MCP). */
  readonly service: TaskService;
  /**
   * Graceful stop: takes no new task, lets running ones finish within `shutdownGraceMs`, hands the rest
   * back to the queue (they stay `running` with their checkpoints, and another worker resumes them at
   * once), closes the pool and the store, then the health endpoint. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Starts a worker: the task service over a shared queue (a Redis `tasks.store`), running up to
 * `tasks.maxConcurrent` tasks at once, with `GET /healthz` on `host`:`port` (8766 by default; the health view of the
 * server, plus `role: "worker"`) and `GET /metrics` (the server's metrics of this process, guarded as the
 * server's), behind the same Host/Origin allow-lists. It serves no MCP and no REST.
 *
 * @throws {KlymError} `CONFIG_INVALID` without a Redis `tasks.store` (or a `tasks.queue`), or with `tasks.maxConcurrent` 0; `STORE_UNAVAILABLE` when Redis cannot be reached.
 */
export async function startKlymWorker(options: KlymServerOptions): Promise<RunningKlymWorker> {
  const store = options.tasks?.store;
  const shared = options.tasks?.queue !== undefined || (typeof store === 'string' && /^rediss?:\/\//.test(store));
  if (!shared)
    throw new KlymError(
      'CONFIG_INVALID',
      'Expected a Redis `tasks.store` (redis://host:port/db) for `klym worker`: a worker takes its tasks from the queue that fronts share there',
    );
  if (options.tasks?.maxConcurrent === 0)
    throw new KlymError('CONFIG_INVALID', 'Expected `tasks.concurrency` of at least 1 for `klym worker`, got 0: a worker runs tasks');
  const resolved = resolveServerOptions({ ...options, port: options.port ?? SERVER_DEFAULTS.workerPort });
  const metrics = metricsFor(resolved);
  const tasks = await openTasks(resolved, {
    onCall: (call) => metrics.observeCall(call),
    onEvent: (event) => metrics.observeTaskEvent(event),
    onRefuse: (refusal) => metrics.observeRefusal(refusal),
  });
  metrics.watch(tasks.service);
  const app = new Hono<{ Bindings: Partial<HttpBindings>; Variables: GuardVariables }>();
  app.use('*', requestLog(resolved.log));
  app.use('*', hostAndOriginGuard(resolved));
  app.get('/healthz', async (c) => c.json({ role: 'worker', ...(await tasks.service.health()) }));
  mountMetrics(app, metrics, resolved);
  app.notFound((c) =>
    c.json({ error: { code: 'NOT_FOUND', message: `No route ${c.req.method} ${c.req.path}: a worker serves only GET /healthz and GET /metrics` } }, 404),
  );
  const server = serve({ fetch: app.fetch, hostname: resolved.host, port: resolved.port });
  try {
    if (!server.listening) await once(server, 'listening');
  } catch (error) {
    await tasks.close();
    throw new KlymError('CONFIG_INVALID', `Klym's worker could not listen on ${resolved.host}:${resolved.port}`, { cause: error });
  }
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  const worker: RunningKlymWorker = {
    url: `http://${resolved.host.includes(':') ? `[${resolved.host}]` : resolved.host}:${port}`,
    port,
    service: tasks.service,
    close() {
      closing ??= (async () => {
        try {
          await tasks.close();
        } finally {
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          if ('closeAllConnections' in server) server.closeAllConnections();
          await closed;
        }
      })();
      return closing;
    },
    [Symbol.asyncDispose]: () => worker.close(),
  };
  return worker;
}
