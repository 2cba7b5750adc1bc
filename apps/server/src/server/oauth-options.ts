import { KlymError } from '@klym/core';
import { getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/server';
import { isLoopback } from './loopback.ts';

/** The operations a caller's access token must grant, each by a scope of its own. */
export type KlymOperation = 'start' | 'read' | 'cancel';

/**
 * Klym as an OAuth 2.1 resource server (`auth.oauth`): callers may present JWT access tokens of one
 * authorization server, verified against its published keys. Static `auth.tokens` keep working beside it.
 */
export interface OAuthResourceOptions {
  /** The authorization server's issuer identifier (an https URL; http only on loopback): a token's `iss` must equal it. */
  readonly issuer: string;
  /**
   * Klym's resource URL (RFC 8707, RFC 9728 `resource`): what clients ask the authorization server for a token
   * to, and what `/.well-known/oauth-protected-resource` names. Set it to the URL clients reach Klym at
   * (behind a proxy, the proxy's). @default `http://<host>:<port>/mcp` (needs a fixed port and a bound host)
   */
  readonly resource?: string;
  /** What a token's `aud` must contain, for authorization servers that do not put the resource URL there. @default `resource` */
  readonly audience?: string;
  /** Where the issuer's signing keys are (a JWK Set). @default `jwks_uri` of the issuer's metadata (RFC 8414, else OpenID Connect discovery) */
  readonly jwksUri?: string;
  /**
   * The claim whose value is the caller's principal (the owner of its tasks). A value that names a principal of
   * the static `tokens` (or `anonymous`, the caller where there is no auth) is refused: anyone who can choose
   * their name at the issuer would otherwise take that caller's tasks. @default 'sub'
   */
  readonly principalClaim?: string;
  /**
   * Grants, by the `principalClaim`'s value: the principal a caller with that value acts as, with its tasks — a
   * static token's (`{ '<grynya's sub at the issuer>': 'grynya' }`). A principal named here is refused to every
   * other access token, as a static one is. @default {}
   */
  readonly principals?: Readonly<Record<string, string>>;
  /** The scope each operation needs. @default { start: 'klym:start', read: 'klym:read', cancel: 'klym:cancel' } */
  readonly scopes?: Readonly<Partial<Record<KlymOperation, string>>>;
  /** The signature algorithms accepted. @default any asymmetric one the issuer's key allows (never `none`, never HMAC) */
  readonly algorithms?: readonly string[];
  /** How far the clocks of Klym and the issuer may disagree when `exp` and `nbf` are checked, in seconds. @default 30 */
  readonly clockToleranceSeconds?: number;
}

/** {@link OAuthResourceOptions} with every default applied. */
export interface ResolvedOAuthOptions extends OAuthResourceOptions {
  readonly resource: string;
  readonly audience: string;
  readonly principalClaim: string;
  readonly principals: Readonly<Record<string, string>>;
  readonly scopes: Readonly<Record<KlymOperation, string>>;
  readonly clockToleranceSeconds: number;
  /** Where the resource's metadata document is (RFC 9728 §3.1), for `WWW-Authenticate`'s `resource_metadata`. */
  readonly resourceMetadataUrl: string;
}

/** Defaults of {@link OAuthResourceOptions}. */
export const OAUTH_DEFAULTS = {
  principalClaim: 'sub',
  scopes: { start: 'klym:start', read: 'klym:read', cancel: 'klym:cancel' },
  clockToleranceSeconds: 30,
} as const;

/** A principal is the owner of tasks, shown on the dashboard and in logs: a short line of text. */
export const USABLE_PRINCIPAL = /^[^\p{Cc}]{1,256}$/u;

/** A scope token as RFC 6749 §3.3 allows it: printable ASCII but space, `"` and `\`. */
export const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** Whether `url` is an https URL, or an http one on a loopback host: OAuth 2.1 asks TLS of every other. */
export function isSecureUrl(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const { protocol, hostname } = new URL(url);
  return protocol === 'https:' || (protocol === 'http:' && isLoopback(hostname));
}

/** Whether `url` can name a protected resource: an http(s) URL without a fragment (RFC 8707 §2). */
export function isResourceUrl(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const { protocol, host, hash } = new URL(url);
  return (protocol === 'https:' || protocol === 'http:') && host !== '' && hash === '';
}

const invalid = (name: string, expected: string, value: unknown): KlymError =>
  new KlymError('CONFIG_INVALID', `Expected \`auth.oauth.${name}\` to be ${expected}, got ${JSON.stringify(value)}`);

/**
 * The resource URL of a server listening on `host`:`port`: `http://<host>:<port>/mcp`.
 * @throws {KlymError} `CONFIG_INVALID` for port 0 or a wildcard host: tokens are bound to the resource, which
 * cannot be a port picked at random or an address nobody can reach.
 */
export function defaultResource(host: string, port: number): string {
  const bound = host.replace(/^\[|\]$/g, '');
  if (port === 0 || bound === '0.0.0.0' || bound === '::') {
    throw new KlymError(
      'CONFIG_INVALID',
      `\`auth.oauth.resource\` is required when the server listens on ${port === 0 ? 'a free port (0)' : `"${host}"`}: set it to the URL clients reach Klym's /mcp at`,
    );
  }
  return `http://${bound.includes(':') ? `[${bound}]` : bound}:${port}/mcp`;
}

/**
 * Checks `options` and applies the defaults; `host` and `port` are where the server listens, for the
 * default `resource`.
 * @throws {KlymError} `CONFIG_INVALID` naming the option that is wrong, or `resource` when it cannot be defaulted.
 */
export function resolveOAuthOptions(options: OAuthResourceOptions, host: string, port: number): ResolvedOAuthOptions {
  if (!isSecureUrl(options.issuer)) throw invalid('issuer', 'an https URL (http only on a loopback host)', options.issuer);
  if (options.jwksUri !== undefined && !isSecureUrl(options.jwksUri)) throw invalid('jwksUri', 'an https URL (http only on a loopback host)', options.jwksUri);
  if (options.resource !== undefined && !isResourceUrl(options.resource)) throw invalid('resource', 'an http(s) URL without a fragment', options.resource);
  if (options.audience === '') throw invalid('audience', 'a non-empty string', options.audience);
  if (options.principalClaim === '') throw invalid('principalClaim', 'a claim name', options.principalClaim);
  for (const [value, principal] of Object.entries(options.principals ?? {})) {
    if (!USABLE_PRINCIPAL.test(value)) throw invalid('principals', `keyed by claim values of 1 to 256 characters`, value);
    if (typeof principal !== 'string' || !USABLE_PRINCIPAL.test(principal))
      throw invalid(`principals.${value}`, 'a principal (1 to 256 characters)', principal);
  }
  for (const [operation, scope] of Object.entries(options.scopes ?? {})) {
    if (!SCOPE_TOKEN.test(scope)) throw invalid(`scopes.${operation}`, 'a scope token (no spaces, quotes or backslashes)', scope);
  }
  const tolerance = options.clockToleranceSeconds;
  if (tolerance !== undefined && !(Number.isFinite(tolerance) && tolerance >= 0))
    throw invalid('clockToleranceSeconds', 'a number of seconds, 0 or more', tolerance);
  const resource = options.resource ?? defaultResource(host, port);
  return {
    ...options,
    resource,
    audience: options.audience ?? resource,
    principalClaim: options.principalClaim ?? OAUTH_DEFAULTS.principalClaim,
    principals: { ...options.principals },
    scopes: { ...OAUTH_DEFAULTS.scopes, ...options.scopes },
    clockToleranceSeconds: tolerance ?? OAUTH_DEFAULTS.clockToleranceSeconds,
    // The well-known path inserted before the resource's own path (RFC 9728 §3.1), as the MCP SDK builds it.
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(new URL(resource)),
  };
}
