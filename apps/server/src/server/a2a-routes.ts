import type { HttpBindings } from '@hono/node-server';
import type { TaskService } from '@klym/core';
import { createA2aEndpoint } from '@klym/core/a2a';
import type { Hono } from 'hono';
import type { GuardVariables } from './guards.ts';
import { SERVER_INFO } from './mcp-server.ts';
import type { ResolvedServerOptions } from './server-options.ts';

type Env = { Bindings: Partial<HttpBindings>; Variables: GuardVariables };

/** Where the A2A JSON-RPC endpoint is served. */
export const A2A_PATH = '/a2a';

/**
 * Mounts Klym's A2A 1.0 door (core's `createA2aEndpoint`): the Agent Card at `/.well-known/agent-card.json`
 * (public, as discovery is; its security schemes say which tokens `/a2a` takes: bearer, and OAuth2 with
 * `auth.oauth`), and the JSON-RPC endpoint at `POST /a2a`, which the app puts behind the same bearer auth, body
 * limit and scopes as `/mcp`; each request is answered for its principal.
 */
export function mountA2aRoutes(app: Hono<Env>, service: TaskService, options: ResolvedServerOptions): void {
  const oauth = options.auth?.oauth;
  const endpoint = createA2aEndpoint(service, {
    version: SERVER_INFO.version,
    path: A2A_PATH,
    ...(options.a2a?.url === undefined ? {} : { url: options.a2a.url }),
    ...(options.a2a?.maxBlockMs === undefined ? {} : { maxBlockMs: options.a2a.maxBlockMs }),
    security: {
      bearer: options.auth !== undefined,
      ...(oauth === undefined ? {} : { oauth: { issuer: oauth.issuer, scopes: oauth.scopes } }),
    },
  });
  app.get('/.well-known/agent-card.json', async (c) => c.json(await endpoint.card(c.req.url)));
  // The guards may have read the body (the scope check); Hono keeps it for the route.
  app.post(A2A_PATH, async (c) => endpoint.handle(await c.req.text(), c.req.raw.headers, c.get('principal')));
}
