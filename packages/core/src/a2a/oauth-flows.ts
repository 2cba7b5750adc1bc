import type { OAuthFlows } from '@a2a-js/sdk';

/** What an Agent Card's OAuth2 `flows` are written from: an authorization server's metadata (RFC 8414 §2), as far as it goes. */
export interface AuthorizationServerMetadata {
  readonly issuer?: string;
  readonly authorization_endpoint?: string;
  readonly token_endpoint?: string;
  readonly device_authorization_endpoint?: string;
  readonly grant_types_supported?: readonly string[];
}

/** The scope of each operation, as the card's requirement names them. */
export type OperationScopes = Readonly<Record<'start' | 'read' | 'cancel', string>>;

/** How long one metadata request may take. */
const DISCOVERY_TIMEOUT_MS = 5_000;
/** After a failed discovery, how long the card goes without flows before the issuer is asked again: a card is fetched often, and must not wait on an issuer that is down each time. */
const RETRY_AFTER_MS = 60_000;

/**
 * The card's OAuth2 `flows` (A2A's `OAuthFlows`, one flow) from the issuer's metadata: the authorization code
 * flow with PKCE when the server offers it (RFC 8414's default grants include it), else client credentials
 * (an agent acting for itself), else the device code flow; `undefined` when the metadata names the endpoints
 * of none. Each flow's scopes are Klym's three, described.
 */
export function oauthFlowsOf(metadata: AuthorizationServerMetadata, scopes: OperationScopes): OAuthFlows | undefined {
  const described = {
    [scopes.start]: 'Start tasks: SendMessage, SendStreamingMessage',
    [scopes.read]: 'Read tasks: GetTask, ListTasks, SubscribeToTask, push notification configs',
    [scopes.cancel]: 'Cancel tasks: CancelTask',
  };
  const grants = metadata.grant_types_supported ?? ['authorization_code', 'implicit'];
  const { authorization_endpoint: authorizationUrl, token_endpoint: tokenUrl, device_authorization_endpoint: deviceUrl } = metadata;
  if (grants.includes('authorization_code') && authorizationUrl !== undefined && tokenUrl !== undefined) {
    return { flow: { $case: 'authorizationCode', value: { authorizationUrl, tokenUrl, refreshUrl: '', scopes: described, pkceRequired: true } } };
  }
  if (grants.includes('client_credentials') && tokenUrl !== undefined) {
    return { flow: { $case: 'clientCredentials', value: { tokenUrl, refreshUrl: '', scopes: described } } };
  }
  if (grants.includes('urn:ietf:params:oauth:grant-type:device_code') && deviceUrl !== undefined && tokenUrl !== undefined) {
    return { flow: { $case: 'deviceCode', value: { deviceAuthorizationUrl: deviceUrl, tokenUrl, refreshUrl: '', scopes: described } } };
  }
  return undefined;
}

/**
 * Where an issuer's metadata may be, in the order clients try them: RFC 8414's well-known path inserted
 * before the issuer's path, then OpenID Connect Discovery's appended to it.
 */
export function metadataUrlsOf(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, '');
  return [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${url.origin}${path}/.well-known/openid-configuration`];
}

/**
 * A reader of `issuer`'s metadata for the card: fetched on first use and kept; a failure (the issuer down,
 * a document naming another issuer, a body that is not JSON) gives `undefined`, and the issuer is asked again
 * only a minute later. Never throws.
 */
export function issuerMetadataReader(issuer: string, fetchImpl: typeof fetch = fetch): () => Promise<AuthorizationServerMetadata | undefined> {
  let known: AuthorizationServerMetadata | undefined;
  let pending: Promise<AuthorizationServerMetadata | undefined> | undefined;
  let failedAt = Number.NEGATIVE_INFINITY;
  const discover = async (): Promise<AuthorizationServerMetadata | undefined> => {
    for (const url of metadataUrlsOf(issuer)) {
      const response = await fetchImpl(url, { headers: { accept: 'application/json' }, redirect: 'manual', signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS) });
      if (response.status === 404) {
        await response.body?.cancel();
        continue;
      }
      const metadata = response.status === 200 ? ((await response.json().catch(() => undefined)) as AuthorizationServerMetadata | undefined) : undefined;
      // RFC 8414 §3.3: a document naming another issuer is not this one's.
      return metadata?.issuer === issuer ? metadata : undefined;
    }
    return undefined;
  };
  return async () => {
    if (known !== undefined) return known;
    if (Date.now() - failedAt < RETRY_AFTER_MS) return undefined;
    pending ??= discover()
      .catch(() => undefined)
      .then((metadata) => {
        pending = undefined;
        if (metadata === undefined) failedAt = Date.now();
        known = metadata;
        return metadata;
      });
    return pending;
  };
}
