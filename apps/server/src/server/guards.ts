import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { bearerChallenge } from './oauth-metadata.ts';
import { needsBody, operationsOf } from './oauth-scopes.ts';
import { createAccessTokenVerifier } from './oauth-verifier.ts';
import type { ResolvedServerOptions } from './server-options.ts';

/** What the guards put on the context. */
export interface GuardVariables {
  /**
   * Who is calling: the principal of the bearer token (a static token's name, or an access token's claim, never
   * one of the former unless `oauth.principals` grants it), or `anonymous` without auth.
   */
  principal: string;
  /** The scopes an OAuth access token granted; absent for a static token and without auth, which may do everything. */
  scopes?: readonly string[];
}

const hostnameOf = (host: string): string => {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(host);
  if (bracketed) return (bracketed[1] as string).toLowerCase();
  return (host.split(':').length > 2 ? host : host.replace(/:\d+$/, '')).toLowerCase();
};

/**
 * Refuses (403) a request whose `Host` names a host outside `allowedHosts`, or whose `Origin` names a host
 * outside `allowedOrigins` (a request without `Origin` passes: it is not from a browser). Both by host
 * name, whatever the port: the defence against DNS rebinding the MCP transport guidance asks for.
 */
export function hostAndOriginGuard(options: ResolvedServerOptions): MiddlewareHandler {
  const hosts = new Set(options.allowedHosts);
  const origins = new Set(options.allowedOrigins);
  return async (c, next) => {
    // A Fetch `Request` (app.request(), other runtimes) carries no Host header; its URL holds the host.
    const host = c.req.header('host') ?? new URL(c.req.url).host;
    if (!hosts.has(hostnameOf(host))) {
      return c.json({ error: { code: 'FORBIDDEN', message: `Host "${host.slice(0, 100)}" is not allowed` } }, 403);
    }
    const origin = c.req.header('origin');
    if (origin !== undefined) {
      let name: string | undefined;
      try {
        name = hostnameOf(new URL(origin).host);
      } catch {
        name = undefined;
      }
      if (name === undefined || !origins.has(name)) {
        return c.json({ error: { code: 'FORBIDDEN', message: `Origin "${origin.slice(0, 100)}" is not allowed` } }, 403);
      }
    }
    await next();
    return undefined;
  };
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * The principal whose token `presented` is, or `undefined`: compared in constant time with every token, so
 * timing says nothing about which one (or whether any) matched. Shared by the bearer auth and the dashboard's login.
 */
export function createTokenMatcher(tokens: Readonly<Record<string, string>>): (presented: string) => string | undefined {
  const known = Object.entries(tokens).map(([principal, token]) => ({ principal, digest: digest(token) }));
  return (presented) => {
    const hashed = digest(presented);
    let principal: string | undefined;
    for (const token of known) if (timingSafeEqual(hashed, token.digest)) principal ??= token.principal;
    return principal;
  };
}

/**
 * Sets the caller's principal. With `auth`, a request must carry `Authorization: Bearer <token>`, else 401;
 * tokens anywhere else (query string) are not accepted. The token is first compared (in constant time) with
 * `auth.tokens`; then, with `auth.oauth`, verified as a JWT access token, whose claim is the principal (refused
 * when it names a static token's principal, unless `oauth.principals` grants it) and whose scopes `scopeGuard` checks. A refused token gets 401 with a `WWW-Authenticate` challenge (with
 * `auth.oauth`, naming the resource's metadata and why); the issuer's keys out of reach, 503. Neither answer
 * nor the log holds the token. Without auth, everyone is `anonymous`.
 */
export function bearerAuth(options: ResolvedServerOptions): MiddlewareHandler<{ Variables: GuardVariables }> {
  const principalOf = createTokenMatcher(options.auth?.tokens ?? {});
  const oauth = options.auth?.oauth;
  // Access tokens never act as a static token's principal (nor `anonymous`) unless `oauth.principals` grants it.
  const staticPrincipals = Object.keys(options.auth?.tokens ?? {});
  const verifier = oauth === undefined ? undefined : createAccessTokenVerifier(oauth, { staticPrincipals });
  return async (c, next) => {
    if (options.auth === undefined) {
      c.set('principal', 'anonymous');
      await next();
      return undefined;
    }
    const token = /^Bearer +(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
    const principal = token === undefined ? undefined : principalOf(token);
    if (principal !== undefined) {
      c.set('principal', principal);
      await next();
      return undefined;
    }
    if (oauth === undefined || verifier === undefined || token === undefined) {
      c.header('WWW-Authenticate', oauth === undefined ? 'Bearer realm="klym"' : bearerChallenge(oauth));
      const message = token === undefined ? 'A bearer token is required in the Authorization header' : 'The bearer token is not valid';
      return c.json({ error: { code: 'UNAUTHORIZED', message } }, 401);
    }
    const checked = await verifier.verify(token);
    if (!checked.ok && checked.status === 503) {
      options.log(`klym: refused a request with an access token: ${checked.description}`, 'warning');
      return c.json({ error: { code: 'AUTH_UNAVAILABLE', message: checked.description } }, 503);
    }
    if (!checked.ok) {
      c.header('WWW-Authenticate', bearerChallenge(oauth, { error: 'invalid_token', description: checked.description }));
      return c.json({ error: { code: 'UNAUTHORIZED', message: checked.description } }, 401);
    }
    c.set('principal', checked.principal);
    c.set('scopes', checked.scopes);
    await next();
    return undefined;
  };
}

/**
 * Refuses (403, `insufficient_scope`) a request whose OAuth access token lacks a scope the request needs
 * (`operationsOf`: start, read or cancel; for MCP, by the JSON-RPC body's method and tool), naming the scopes
 * to ask for — those it needs and the Klym scopes already granted, so a client stepping up loses none. Runs
 * after `bearerAuth` and the body limit (it may read the body, which Hono keeps for the route). A static
 * token, or no auth, passes.
 */
export function scopeGuard(options: ResolvedServerOptions): MiddlewareHandler<{ Variables: GuardVariables }> {
  const oauth = options.auth?.oauth;
  return async (c, next) => {
    const granted = c.get('scopes');
    if (oauth === undefined || granted === undefined) {
      await next();
      return undefined;
    }
    let body: unknown;
    if (needsBody(c.req.method, c.req.path)) {
      const text = await c.req.text();
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined; // not JSON: the route answers -32700
      }
    }
    const needed = operationsOf(c.req.method, c.req.path, body).map((operation) => oauth.scopes[operation]);
    const missing = needed.filter((scope) => !granted.includes(scope));
    if (missing.length > 0) {
      const known = new Set(Object.values(oauth.scopes));
      const scope = [...new Set([...granted.filter((each) => known.has(each)), ...needed])].join(' ');
      const description = `The access token lacks the scope ${missing.join(' and ')} this request needs`;
      c.header('WWW-Authenticate', bearerChallenge(oauth, { error: 'insufficient_scope', description, scope }));
      return c.json({ error: { code: 'FORBIDDEN', message: description } }, 403);
    }
    await next();
    return undefined;
  };
}
