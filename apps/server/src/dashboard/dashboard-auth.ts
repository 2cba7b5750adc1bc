import { randomBytes } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { createTokenMatcher } from '../server/guards.ts';
import type { ResolvedServerOptions } from '../server/server-options.ts';

/** Who looks at the dashboard. */
export interface DashboardViewer {
  /** The principal whose token logged in (`anonymous` without auth). */
  readonly principal: string;
  /** Sees every principal's tasks (`auth.admins`). */
  readonly admin: boolean;
}

/** What the dashboard's auth puts on the context. */
export interface DashboardVariables {
  viewer: DashboardViewer;
}

/** Options of {@link createDashboardAuth}. */
export interface DashboardAuthOptions {
  /** How long a login lasts. @default 43_200_000 (12 h) */
  readonly sessionTtlMs?: number;
  /** Logins kept at most; past it the oldest is forgotten (its browser logs in again). @default 10_000 */
  readonly maxSessions?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

/** The dashboard's logins: a login form's token becomes a session cookie. */
export interface DashboardAuth {
  /** Whether tokens are configured (else everyone is `anonymous` and there is no login). */
  readonly required: boolean;
  /** Sets `viewer` from the session cookie; without a valid one, answers `refuse(c)`. */
  viewer(refuse: (c: Context) => Response | Promise<Response>): MiddlewareHandler<{ Variables: DashboardVariables }>;
  /** Checks a token and, when it names a principal, sets the session cookie on `c`; answers the principal. */
  login(c: Context, token: string): string | undefined;
  /** Forgets the request's session and clears its cookie. */
  logout(c: Context): void;
}

/** The session cookie: a random id the server maps to the principal, never the token. */
export const SESSION_COOKIE = 'klym_session';

const DEFAULT_TTL_MS = 12 * 60 * 60 * 1_000;

/**
 * The dashboard's auth over the server's `auth.tokens`: a login takes a token once, and the browser then
 * holds only a random session id (256 bits) in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` over
 * HTTPS) that the server maps to the principal, so no token is ever stored in the browser. Sessions live
 * in this process: a restart, or another front, asks for the token again. Without tokens there is no
 * login and every viewer is `anonymous`.
 */
export function createDashboardAuth(options: ResolvedServerOptions, authOptions: DashboardAuthOptions = {}): DashboardAuth {
  const ttlMs = authOptions.sessionTtlMs ?? DEFAULT_TTL_MS;
  const maxSessions = authOptions.maxSessions ?? 10_000;
  const now = authOptions.now ?? Date.now;
  const admins = new Set(options.auth?.admins ?? []);
  const principalOf = createTokenMatcher(options.auth?.tokens ?? {});
  const sessions = new Map<string, { readonly principal: string; readonly expiresAt: number }>();
  const required = options.auth !== undefined;

  const sessionOf = (c: Context): string | undefined => {
    const id = getCookie(c, SESSION_COOKIE);
    if (id === undefined) return undefined;
    const session = sessions.get(id);
    if (session === undefined) return undefined;
    if (session.expiresAt <= now()) {
      sessions.delete(id);
      return undefined;
    }
    return session.principal;
  };

  return {
    required,
    viewer(refuse) {
      return async (c, next) => {
        const principal = required ? sessionOf(c) : 'anonymous';
        if (principal === undefined) return refuse(c);
        c.set('viewer', { principal, admin: admins.has(principal) });
        await next();
        return undefined;
      };
    },
    login(c, token) {
      const principal = principalOf(token);
      if (principal === undefined) return undefined;
      const id = randomBytes(32).toString('base64url');
      // A Map keeps insertion order: the first key is the oldest login.
      while (sessions.size >= maxSessions) sessions.delete(sessions.keys().next().value as string);
      sessions.set(id, { principal, expiresAt: now() + ttlMs });
      setCookie(c, SESSION_COOKIE, id, {
        httpOnly: true,
        sameSite: 'Strict',
        path: '/',
        maxAge: Math.floor(ttlMs / 1_000),
        secure: new URL(c.req.url).protocol === 'https:',
      });
      return principal;
    },
    logout(c) {
      const id = getCookie(c, SESSION_COOKIE);
      if (id !== undefined) sessions.delete(id);
      deleteCookie(c, SESSION_COOKIE, { path: '/' });
    },
  };
}

/**
 * Whether a state-changing request comes from the dashboard's own pages: its `Origin` must be this very
 * origin (scheme aside, `Host` and port alike). With `SameSite=Strict` cookies, a form another site posts
 * carries no session anyway; this refuses it even where a browser did send one, and refuses a request
 * without `Origin`, which browsers always send on a POST.
 */
export function isSameOrigin(c: Context): boolean {
  const origin = c.req.header('origin');
  if (origin === undefined || origin === 'null') return false;
  const host = c.req.header('host') ?? new URL(c.req.url).host;
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}
