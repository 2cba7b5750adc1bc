import type { MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import type { GuardVariables } from './guards.ts';
import type { ServerLog } from './server-options.ts';

/**
 * Logs one line per HTTP request once it is answered: method, route, status, duration and principal, as
 * the line and as fields. The route is the pattern that matched (`/api/tasks/:id`), never the path, which
 * holds task ids; `null` when no route did. Nothing of the request's headers, query or body is logged, so
 * no token can be. Mount it first, so that it times and sees every answer, refusals included.
 */
export function requestLog(log: ServerLog): MiddlewareHandler<{ Variables: GuardVariables }> {
  return async (c, next) => {
    const startedAt = performance.now();
    await next();
    // Middleware (`use`) matches every method as `ALL`; the last route of a method is the one that answers.
    const route = matchedRoutes(c).findLast((matched) => matched.method !== 'ALL')?.path ?? null;
    const durationMs = Math.round((performance.now() - startedAt) * 10) / 10;
    const principal = c.get('principal') as string | undefined;
    const { method } = c.req;
    const { status } = c.res;
    log(`${method} ${route ?? '(no route)'} ${status} ${durationMs} ms${principal === undefined ? '' : ` (${principal})`}`, 'info', {
      method,
      route,
      status,
      durationMs,
      ...(principal === undefined ? {} : { principal }),
    });
  };
}
