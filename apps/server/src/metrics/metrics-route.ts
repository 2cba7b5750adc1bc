import type { HttpBindings } from '@hono/node-server';
import { TASK_DEFAULTS } from '@klym/core/server';
import type { Hono, MiddlewareHandler } from 'hono';
import { bearerAuth, scopeGuard, type GuardVariables } from '../server/guards.ts';
import type { ResolvedServerOptions } from '../server/server-options.ts';
import { createKlymMetrics, type KlymMetrics } from './klym-metrics.ts';
import { principalNames } from './principal-use.ts';

/**
 * Serves `GET /metrics` in the Prometheus text format. With `metrics.token` it takes only that bearer
 * token (its principal is `metrics`); without, it is guarded as the API is (`auth.tokens`, an OAuth access
 * token granting `read`, or nobody's where the API needs none), by `apiGuard` when given (the app's, so
 * that an issuer's keys are cached once). A request without the token gets 401, as the API's.
 */
export function mountMetrics(
  app: Hono<{ Bindings: Partial<HttpBindings>; Variables: GuardVariables }>,
  metrics: KlymMetrics,
  options: ResolvedServerOptions,
  apiGuard?: MiddlewareHandler<{ Variables: GuardVariables }>,
): void {
  const token = options.metrics?.token;
  const guard = token === undefined ? (apiGuard ?? bearerAuth(options)) : bearerAuth({ ...options, auth: { tokens: { metrics: token } } });
  app.get('/metrics', guard, scopeGuard(options), async (c) => {
    const { contentType, body } = await metrics.render();
    return c.body(body, 200, { 'Content-Type': contentType });
  });
}

/** The server's metrics, their model labels bounded by the models its tasks may name, their principal labels by the configured principals. */
export function metricsFor(options: ResolvedServerOptions): KlymMetrics {
  const { models: given } = options.tasks;
  const models = given !== undefined && given.length > 0 ? given : TASK_DEFAULTS.models;
  return createKlymMetrics({ models, principals: principalNames(options), log: options.log });
}
