// The `server` section of Klym's configuration: where `klym serve` listens, who may call it (tokens, OAuth), and its HTTP limits.
import { z } from 'zod';
import { OAUTH_DEFAULTS, SCOPE_TOKEN, isResourceUrl, isSecureUrl } from '../server/oauth-options.ts';
import { SERVER_DEFAULTS } from '../server/server-options.ts';
import { milliseconds } from './upstream-schema.ts';

const positiveMs = milliseconds.positive();

const secureUrl = z.string().refine(isSecureUrl, 'expected an https URL (http only on a loopback host such as 127.0.0.1)');
const scopeSchema = (fallback: string) => z.string().regex(SCOPE_TOKEN, 'expected a scope token (no spaces, quotes or backslashes)').default(fallback);

/** `server.oauth`: which authorization server's access tokens Klym takes, and what they must say. */
const oauthSchema = z.strictObject({
  /** The authorization server's issuer identifier: a token's `iss` must equal it, and its metadata names the keys. */
  issuer: secureUrl,
  /** Klym's resource URL (RFC 8707/9728): the URL clients reach `/mcp` at. @default `http://<server.host>:<server.port>/mcp` */
  resource: z.string().refine(isResourceUrl, 'expected an http(s) URL without a fragment').optional(),
  /** What a token's `aud` must contain, for authorization servers that do not put the resource URL there. @default `resource` */
  audience: z.string().min(1).optional(),
  /** The issuer's JWK Set. @default the `jwks_uri` of its metadata (RFC 8414, else OpenID Connect discovery) */
  jwksUri: secureUrl.optional(),
  /** The claim whose value is the caller's principal; one naming a principal of `server.tokens` (or `anonymous`) is refused. @default 'sub' */
  principalClaim: z.string().min(1).default(OAUTH_DEFAULTS.principalClaim),
  /** Grants: the principal of `server.tokens` a caller with this claim value acts as, with its tasks (`{ '<sub>': grynya }`). @default {} (none) */
  principals: z.record(z.string().min(1).max(256), z.string().min(1)).optional(),
  /** The scope each operation needs: starting tasks, reading them (status, logs, lists, artifacts, capabilities), cancelling them. */
  scopes: z
    .strictObject({
      /** @default 'klym:start' */
      start: scopeSchema(OAUTH_DEFAULTS.scopes.start),
      /** @default 'klym:read' */
      read: scopeSchema(OAUTH_DEFAULTS.scopes.read),
      /** @default 'klym:cancel' */
      cancel: scopeSchema(OAUTH_DEFAULTS.scopes.cancel),
    })
    .prefault({}),
  /** The signature algorithms accepted. @default any asymmetric one the issuer's key allows */
  algorithms: z
    .array(z.enum(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519']))
    .min(1)
    .optional(),
  /** How far Klym's and the issuer's clocks may disagree when `exp` and `nbf` are checked, in seconds. @default 30 */
  clockToleranceSeconds: z.number().int().nonnegative().default(OAUTH_DEFAULTS.clockToleranceSeconds),
});

/** `server`: where `klym serve` listens, who may call it (static `tokens`, `oauth`), and its HTTP limits; every default the server's (SERVER_DEFAULTS). */
export const serverSchema = z
  .strictObject({
    /** Address to bind; anything but loopback requires `tokens` or `oauth`. @default '127.0.0.1' */
    host: z.string().min(1).default(SERVER_DEFAULTS.host),
    /** TCP port; 0 picks a free one. @default 8765 */
    port: z.number().int().min(0).max(65_535).default(SERVER_DEFAULTS.port),
    /** Bearer tokens by principal (`grynya: <token>`); without any, everyone is `anonymous`. Secret. @default {} */
    tokens: z
      .record(
        z.string().regex(/^[A-Za-z0-9_.@-]+$/, 'expected a principal name of letters, digits and "_.@-"'),
        z.string().min(16, 'expected a token of at least 16 characters'),
      )
      .default({}),
    /**
     * Klym as an OAuth 2.1 resource server: callers may present JWT access tokens of `issuer` (besides `tokens`,
     * which are tried first), each operation behind a scope. @default none: static `tokens` only
     */
    oauth: oauthSchema.optional(),
    /** Principals of `tokens` who see every principal's tasks on the dashboard (the others see their own). @default [] */
    admins: z.array(z.string().min(1)).default([]),
    /** Host names an `Origin` header may name besides loopback; requests with another Origin get 403, requests without one pass. @default [] */
    allowedOrigins: z.array(z.string().min(1)).default([]),
    /** Host names the `Host` header may name besides loopback (`localhost`, `127.0.0.1`, `::1`) and the bound host; others get 403. @default [] */
    allowedHosts: z.array(z.string().min(1)).default([]),
    /** Largest request body, in bytes; larger gets 413. @default 1_048_576 (1 MiB) */
    bodyLimitBytes: z.number().int().min(1_024).default(SERVER_DEFAULTS.maxBodyBytes),
    /** An MCP session idle this long is closed, in milliseconds. @default 1_800_000 (30 min) */
    sessionIdleMs: positiveMs.default(SERVER_DEFAULTS.sessionIdleMs),
  })
  .prefault({});
