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
 * The paths the endpoint answers at: the card's URL, and the same with a trailing slash, where the official
 * conformance kit's client posts (its base URL plus `/`).
 */
export const A2A_PATHS = [A2A_PATH, `${A2A_PATH}/`] as const;

/**
 * Mounts Klym's A2A 1.0 door (core's `createA2aEndpoint`): the public Agent Card at `/.well-known/agent-card.json`
 * (served without login, as discovery is, with `Cache-Control`, `ETag` and 304s; it names Klym, its skill, its
 * interface and the tokens `/a2a` takes: bearer, and OAuth2 with `auth.oauth`), and the JSON-RPC endpoint at
 * `POST /a2a` (and `/a2a/`), which the app puts behind the same bearer auth, body limit and scopes as `/mcp`; each
 * request is answered for its principal, the extended card (the inventory of models, upstreams, tools, policies)
 * included.
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
  app.get('/.well-known/agent-card.json', async (c) => endpoint.cardResponse(c.req.url, c.req.raw.headers));
  // The guards may have read the body (the scope check); Hono keeps it for the route.
  for (const path of A2A_PATHS) app.post(path, async (c) => endpoint.handle(await c.req.text(), c.req.raw.headers, c.get('principal'), c.req.url));
}
