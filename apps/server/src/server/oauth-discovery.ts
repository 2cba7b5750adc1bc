import { isSecureUrl } from './oauth-options.ts';

/** How long one metadata request may take, as long as `jose` gives a JWK Set request. */
const DISCOVERY_TIMEOUT_MS = 5_000;

/**
 * Where an issuer's metadata may be, in the order MCP clients try them: RFC 8414's well-known path inserted
 * before the issuer's path, then OpenID Connect Discovery's appended to it (the two differ only for an issuer
 * with a path, such as Keycloak's `/realms/<name>`).
 */
export function metadataUrlsOf(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, '');
  return [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${url.origin}${path}/.well-known/openid-configuration`];
}

/** Why the issuer's keys could not be found: the issuer is down, or its metadata is not what it should be. */
export class IssuerUnavailableError extends Error {
  override readonly name = 'IssuerUnavailableError';
}

/**
 * The `jwks_uri` of `issuer`, read from its authorization server metadata (RFC 8414) or OpenID Connect
 * discovery document. The document must name the same `issuer` (RFC 8414 §3.3: else anyone serving that
 * path could hand out keys in its name) and an https `jwks_uri` (http only on loopback).
 *
 * @throws {IssuerUnavailableError} naming the URLs tried and what each answered.
 */
export async function discoverJwksUri(issuer: string, options: { readonly fetch?: typeof fetch; readonly timeoutMs?: number } = {}): Promise<string> {
  const fetchImpl = options.fetch ?? fetch;
  const failures: string[] = [];
  for (const url of metadataUrlsOf(issuer)) {
    let response: Response;
    try {
      response = await fetchImpl(url, {
        headers: { accept: 'application/json' },
        redirect: 'manual',
        signal: AbortSignal.timeout(options.timeoutMs ?? DISCOVERY_TIMEOUT_MS),
      });
    } catch (error) {
      const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
      throw new IssuerUnavailableError(`Klym could not reach the issuer ${issuer} for its metadata (${url}): ${reason}`, { cause: error });
    }
    if (response.status === 404) {
      failures.push(`${url} answered 404`);
      continue;
    }
    const metadata =
      response.status === 200 ? ((await response.json().catch(() => undefined)) as { issuer?: unknown; jwks_uri?: unknown } | undefined) : undefined;
    if (metadata === undefined)
      throw new IssuerUnavailableError(
        `The issuer ${issuer}'s metadata (${url}) answered ${response.status}${response.status === 200 ? ' with a body that is not JSON' : ''}`,
      );
    if (metadata.issuer !== issuer)
      throw new IssuerUnavailableError(`The metadata at ${url} names the issuer ${JSON.stringify(metadata.issuer)}, not ${issuer}`);
    if (typeof metadata.jwks_uri !== 'string' || !isSecureUrl(metadata.jwks_uri)) {
      throw new IssuerUnavailableError(`The metadata at ${url} has no usable \`jwks_uri\` (an https URL), got ${JSON.stringify(metadata.jwks_uri)}`);
    }
    return metadata.jwks_uri;
  }
  throw new IssuerUnavailableError(`Klym found no metadata of the issuer ${issuer}: ${failures.join('; ')}; set \`auth.oauth.jwksUri\``);
}
