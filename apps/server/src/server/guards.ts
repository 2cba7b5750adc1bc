import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { ResolvedServerOptions } from './server-options.ts';

/** What the guards put on the context. */
export interface GuardVariables {
  /** Who is calling: the principal of the bearer token, or `anonymous` without auth. */
  principal: string;
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
 * Sets the caller's principal. With `auth.tokens`, a request must carry `Authorization: Bearer <token>`
 * naming one of them (compared in constant time), else 401; tokens anywhere else (query string) are not
 * accepted. Without auth, everyone is `anonymous`.
 */
export function bearerAuth(options: ResolvedServerOptions): MiddlewareHandler<{ Variables: GuardVariables }> {
  const principalOf = createTokenMatcher(options.auth?.tokens ?? {});
  return async (c, next) => {
    if (options.auth === undefined) {
      c.set('principal', 'anonymous');
      await next();
      return undefined;
    }
    const match = /^Bearer +(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
    const principal = match ? principalOf(match[1] as string) : undefined;
    if (principal === undefined) {
      c.header('WWW-Authenticate', 'Bearer realm="klym"');
      const message = match ? 'The bearer token is not valid' : 'A bearer token is required in the Authorization header';
      return c.json({ error: { code: 'UNAUTHORIZED', message } }, 401);
    }
    c.set('principal', principal);
    await next();
    return undefined;
  };
}
