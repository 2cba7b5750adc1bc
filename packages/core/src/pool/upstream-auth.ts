import { createPrivateKey } from 'node:crypto';
import {
  auth,
  ClientCredentialsProvider,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
  PrivateKeyJwtProvider,
  UnauthorizedError,
  type AuthProvider,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import type { PoolClock } from './clock.ts';

/**
 * How the pool gets an OAuth access token for an HTTP upstream (`upstreams.<name>.auth`): the
 * `client_credentials` grant, the client authenticated by a secret (`client_secret_basic`) or by a JWT
 * assertion signed with its private key (`private_key_jwt`, RFC 7523; the MCP client-credentials
 * extension, SEP-1046), at the authorization server `issuer` and no other: an upstream whose protected
 * resource metadata (RFC 9728) names other authorization servers only is refused before any is asked.
 */
export type UpstreamAuth =
  | {
      readonly type: 'client_credentials';
      readonly clientId: string;
      readonly clientSecret: string;
      /** Space-separated scopes. @default what the upstream's metadata offers */
      readonly scope?: string;
      /**
       * The issuer of the authorization server the client is registered with, which alone is sent its
       * credentials: an https URL (http only on loopback: 127.0.0.0/8, `::1`, `localhost`). Required: without
       * it the upstream would name the server that receives them.
       */
      readonly issuer: string;
    }
  | {
      readonly type: 'private_key_jwt';
      readonly clientId: string;
      /** The private key, PEM (PKCS#8 or a traditional RSA/EC key). */
      readonly privateKey: string;
      /** The JWS algorithm. @default from the key: RS256 (RSA), ES256/ES384/ES512 (EC by curve), EdDSA (Ed25519) */
      readonly algorithm?: string;
      readonly scope?: string;
      /** As for `client_credentials`: the authorization server the client is registered with, which alone is sent its assertions. */
      readonly issuer: string;
    };

/** An upstream's `auth` with its algorithm settled. */
export type ResolvedUpstreamAuth =
  Extract<UpstreamAuth, { type: 'client_credentials' }> | (Extract<UpstreamAuth, { type: 'private_key_jwt' }> & { readonly algorithm: string });

/** The secrets `auth` holds, for redaction: the client secret, or the private key (whole, and line by line). */
export function upstreamAuthSecrets(upstreamAuth: UpstreamAuth | undefined): string[] {
  if (upstreamAuth === undefined) return [];
  if (upstreamAuth.type === 'client_credentials') return [upstreamAuth.clientSecret];
  const key = upstreamAuth.privateKey.trim();
  return [key, ...key.split(/\r?\n/).filter((line) => !line.startsWith('-----'))];
}

/**
 * Checks `auth` and settles its algorithm (from the key when not given).
 * @throws {Error} naming the field that is wrong (never its value).
 */
export function resolveUpstreamAuth(upstreamAuth: UpstreamAuth): ResolvedUpstreamAuth {
  const type = (upstreamAuth as { type?: unknown }).type;
  if (type !== 'client_credentials' && type !== 'private_key_jwt')
    throw new Error(`expected \`auth.type\` to be "client_credentials" or "private_key_jwt", got ${JSON.stringify(type)}`);
  if (typeof upstreamAuth.clientId !== 'string' || upstreamAuth.clientId === '') throw new Error('expected `auth.clientId` to be a non-empty string');
  const issuer: unknown = upstreamAuth.issuer;
  if (typeof issuer !== 'string' || !isSecureIssuer(issuer)) {
    throw new Error(
      'expected `auth.issuer` to be the https URL of the authorization server the client is registered with ' +
        `(http only on loopback: 127.0.0.0/8, ::1, localhost), got ${JSON.stringify(issuer) ?? 'nothing'}`,
    );
  }
  if (upstreamAuth.type === 'client_credentials') {
    if (typeof upstreamAuth.clientSecret !== 'string' || upstreamAuth.clientSecret === '')
      throw new Error('expected `auth.clientSecret` to be a non-empty string');
    return upstreamAuth;
  }
  let algorithm: string;
  try {
    algorithm = upstreamAuth.algorithm ?? algorithmOf(upstreamAuth.privateKey);
  } catch (error) {
    // The key's own parse error may quote it: say what is wrong, not what it held.
    throw new Error(`expected \`auth.privateKey\` to be a PEM private key (${error instanceof Error && 'code' in error ? String(error.code) : 'unreadable'})`, {
      cause: error,
    });
  }
  return { ...upstreamAuth, algorithm };
}

/** Whether `host` (a URL's `hostname`) is loopback: 127.0.0.0/8, `::1` or `localhost`. */
function isLoopbackHost(host: string): boolean {
  const name = host.replace(/^\[|\]$/g, '').toLowerCase();
  return name === 'localhost' || name === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/** Whether `issuer` can be an authorization server's issuer Klym sends credentials to: https, or http on loopback; no query or fragment (RFC 8414 §2). */
function isSecureIssuer(issuer: string): boolean {
  if (!URL.canParse(issuer)) return false;
  const { protocol, hostname, search, hash } = new URL(issuer);
  return (protocol === 'https:' || (protocol === 'http:' && isLoopbackHost(hostname))) && search === '' && hash === '';
}

/** Whether two issuer identifiers are the same, a trailing slash aside (as the SDK compares them). */
const sameIssuer = (one: string, other: string): boolean => one.replace(/\/+$/, '') === other.replace(/\/+$/, '');

/** The JWS algorithm that fits a PEM private key. */
function algorithmOf(pem: string): string {
  const key = createPrivateKey(pem);
  const curve = key.asymmetricKeyDetails?.namedCurve;
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return 'RS256';
    case 'ec':
      return curve === 'secp384r1' ? 'ES384' : curve === 'secp521r1' ? 'ES512' : 'ES256';
    case 'ed25519':
      return 'EdDSA';
    default:
      throw Object.assign(new Error('unsupported key type'), { code: `a ${key.asymmetricKeyType ?? 'unknown'} key, not RSA, EC or Ed25519` });
  }
}

/** What the transport hands `onUnauthorized`: the 401, the server's URL, its fetch. */
type UnauthorizedContext = Parameters<NonNullable<AuthProvider['onUnauthorized']>>[0];

/** A token is renewed in the last fifth of its lifetime, and at most this long before it expires. */
const RENEW_AHEAD_MS = 60_000;

/**
 * The access tokens of one upstream, shared by all its sessions: the SDK's provider for the grant
 * (`ClientCredentialsProvider`, `PrivateKeyJwtProvider`) runs discovery and the token request, on a 401
 * and — since the SDK renews only on a 401 — before the token expires: the first request after the last
 * fifth of its lifetime began (and at most a minute before it ends) waits for a fresh one (if the
 * authorization server fails it, the old token serves until it expires, and the next request tries again). Renewals are
 * shared: concurrent requests wait for one token request. What the authorization server was found to be is
 * kept, so a renewal is one request. No token or secret is ever put in an error or a log.
 */
export class UpstreamTokens implements AuthProvider {
  readonly #provider: OAuthClientProvider;
  readonly #serverUrl: URL;
  readonly #issuer: string;
  readonly #scope: string | undefined;
  readonly #clock: PoolClock;
  #discovery: OAuthDiscoveryState | undefined;
  /** When (on the pool's clock) the token should be renewed, and when it expires; `undefined` for one without `expires_in`. */
  #renewAt: number | undefined;
  #expiresAt: number | undefined;
  #renewing: Promise<void> | undefined;

  constructor(upstreamAuth: ResolvedUpstreamAuth, serverUrl: URL, clock: PoolClock) {
    this.#serverUrl = serverUrl;
    this.#issuer = upstreamAuth.issuer;
    this.#scope = upstreamAuth.scope;
    this.#clock = clock;
    const common = { clientId: upstreamAuth.clientId, ...(upstreamAuth.scope === undefined ? {} : { scope: upstreamAuth.scope }) };
    // A second check behind `#discover`, which hands the SDK no other server: the SDK refuses metadata naming another issuer.
    const pinned = { expectedIssuer: upstreamAuth.issuer };
    const provider: OAuthClientProvider =
      upstreamAuth.type === 'client_credentials'
        ? new ClientCredentialsProvider({ ...common, ...pinned, clientSecret: upstreamAuth.clientSecret })
        : new PrivateKeyJwtProvider({ ...common, ...pinned, privateKey: upstreamAuth.privateKey, algorithm: upstreamAuth.algorithm });
    this.#provider = this.#remembering(provider);
  }

  async token(): Promise<string | undefined> {
    if (this.#renewAt !== undefined && this.#clock.now() >= this.#renewAt) {
      try {
        await this.#renew(undefined);
      } catch (error) {
        // Renewing early failed (the authorization server is down): the token still good serves until it expires, and the next request tries again.
        if (this.#expiresAt === undefined || this.#clock.now() >= this.#expiresAt) throw error;
      }
    }
    return (await this.#provider.tokens())?.access_token;
  }

  async onUnauthorized(context: UnauthorizedContext): Promise<void> {
    await this.#renew(context);
  }

  /** Gets a fresh token (one request at a time); `context` is the 401 that asked for it, if one did. */
  #renew(context: UnauthorizedContext | undefined): Promise<void> {
    this.#renewing ??= (async () => {
      const challenge = context === undefined ? {} : extractWWWAuthenticateParams(context.response);
      this.#discovery ??= await this.#discover(context?.serverUrl ?? this.#serverUrl, challenge.resourceMetadataUrl);
      const scope = challenge.scope ?? this.#scope;
      const result = await auth(this.#provider, {
        serverUrl: context?.serverUrl ?? this.#serverUrl,
        ...(challenge.resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl: challenge.resourceMetadataUrl }),
        ...(scope === undefined ? {} : { scope }),
        // The authorization server is another host: not the upstream's own fetch (its Host header, its limits).
        fetchFn: fetch,
      });
      if (result !== 'AUTHORIZED') throw new UnauthorizedError('the authorization server gave no access token');
    })().finally(() => {
      this.#renewing = undefined;
    });
    return this.#renewing;
  }

  /**
   * Where to get tokens: the configured issuer, once the upstream's protected resource metadata (RFC 9728), if it
   * has any, names it among its authorization servers. Handed to the SDK as what it discovered, so that it asks
   * the issuer's metadata and no other server's.
   * @throws {UnauthorizedError} when the metadata names other authorization servers only: nothing is sent to them.
   */
  async #discover(serverUrl: URL, resourceMetadataUrl: URL | undefined): Promise<OAuthDiscoveryState> {
    let resourceMetadata: OAuthDiscoveryState['resourceMetadata'];
    try {
      resourceMetadata = await discoverOAuthProtectedResourceMetadata(serverUrl, resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl }, fetch);
    } catch (error) {
      // The upstream unreachable is the connect's failure to report; metadata it does not serve leaves the issuer as it is.
      if (error instanceof TypeError) throw error;
    }
    const named = resourceMetadata?.authorization_servers ?? [];
    if (named.length > 0 && !named.some((server) => sameIssuer(server, this.#issuer))) {
      throw new UnauthorizedError(
        `its protected resource metadata names the authorization server ${named.join(', ')}, not the configured \`auth.issuer\` ${this.#issuer}, ` +
          'the only one its credentials go to: no token was asked for',
      );
    }
    return {
      authorizationServerUrl: this.#issuer,
      ...(resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl: resourceMetadataUrl.href }),
      ...(resourceMetadata === undefined ? {} : { resourceMetadata }),
    };
  }

  /** `provider`, which also keeps the discovery's outcome and notes when each token is to be renewed. */
  #remembering(provider: OAuthClientProvider): OAuthClientProvider {
    const saveTokens = provider.saveTokens.bind(provider);
    return Object.assign(provider, {
      saveTokens: (tokens: StoredOAuthTokens) => {
        const lifetimeMs = typeof tokens.expires_in === 'number' && tokens.expires_in > 0 ? tokens.expires_in * 1_000 : undefined;
        const now = this.#clock.now();
        this.#renewAt = lifetimeMs === undefined ? undefined : now + lifetimeMs - Math.min(lifetimeMs / 5, RENEW_AHEAD_MS);
        this.#expiresAt = lifetimeMs === undefined ? undefined : now + lifetimeMs;
        return saveTokens(tokens);
      },
      discoveryState: () => this.#discovery,
      saveDiscoveryState: (state: OAuthDiscoveryState) => {
        this.#discovery = state;
      },
    });
  }
}
