import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { IssuerUnavailableError, discoverJwksUri } from './oauth-discovery.ts';
import type { ResolvedOAuthOptions } from './oauth-options.ts';

/** What a bearer token turned out to be: a caller and its scopes, or why not (never the token itself). */
export type AccessTokenCheck =
  | { readonly ok: true; readonly principal: string; readonly scopes: readonly string[] }
  /** 401: the token is not one Klym takes. 503: its issuer's keys cannot be had now; the token may be fine. */
  | { readonly ok: false; readonly status: 401 | 503; readonly description: string };

/** Checks JWT access tokens of one issuer. */
export interface AccessTokenVerifier {
  /** Verifies `token`'s signature against the issuer's keys, then its `iss`, `aud`, `exp`/`nbf` and principal claim. Never throws. */
  verify(token: string): Promise<AccessTokenCheck>;
}

/** A principal is the owner of tasks, shown on the dashboard and in logs: a short line of text. */
const USABLE_PRINCIPAL = /^[^\p{Cc}]{1,256}$/u;

/** The granted scopes: RFC 9068's `scope` (space-separated), or `scp` (a list or a string) as Azure and Okta send them. */
function scopesOf(payload: JWTPayload): string[] {
  const listed = [payload.scope, payload.scp].flatMap((value) => (typeof value === 'string' ? value.split(' ') : Array.isArray(value) ? value : []));
  return [...new Set(listed.filter((scope): scope is string => typeof scope === 'string' && scope !== ''))];
}

/** Why `error` refused a token, said so the caller can act, with nothing of the token in it; or undefined when it is not the token's fault. */
function describeRefusal(error: unknown, options: ResolvedOAuthOptions): string | undefined {
  if (error instanceof errors.JWTExpired) {
    const expiry = typeof error.payload.exp === 'number' ? ` at ${new Date(error.payload.exp * 1000).toISOString()}` : '';
    return `The access token expired${expiry}`;
  }
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return `The access token is not for this resource: its audience must include ${options.audience}`;
    if (error.claim === 'iss') return `The access token was not issued by ${options.issuer}`;
    if (error.claim === 'nbf') return 'The access token is not valid yet (`nbf`)';
    if (error.reason === 'missing') return `The access token has no \`${error.claim}\` claim`;
    return `The access token's \`${error.claim}\` claim is not valid`;
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return `The access token's signature does not verify with ${options.issuer}'s keys`;
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) return `The access token is not signed by a key ${options.issuer} publishes`;
  // An HMAC `alg` lands here: a JWK Set holds public keys only, so a token signed with a shared secret is never taken.
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) return 'The access token uses a signature algorithm or header Klym does not accept';
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return 'The bearer token is not a JWT access token';
  return undefined;
}

/** What stood between Klym and the issuer's keys (the issuer down, slow, or answering nonsense). */
function describeOutage(error: unknown, options: ResolvedOAuthOptions): string {
  if (error instanceof IssuerUnavailableError) return error.message;
  const reason = error instanceof Error ? (error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message) : String(error);
  return `Klym could not get the signing keys of the issuer ${options.issuer}: ${reason}`;
}

/**
 * A verifier of `options.issuer`'s JWT access tokens (`jose`'s `jwtVerify`): the keys come from `jwksUri`, or
 * the `jwks_uri` its metadata names, fetched on the first token (so Klym starts while the issuer is down)
 * and cached and refreshed by `jose` (a key it has not seen is looked up again, at most every 30 s). A token
 * must carry `exp`; `aud` must include `options.audience` (RFC 8707: a token another resource was given
 * is refused here); the principal is the `principalClaim`, a string.
 */
export function createAccessTokenVerifier(options: ResolvedOAuthOptions, dependencies: { readonly fetch?: typeof fetch } = {}): AccessTokenVerifier {
  let keySet: Promise<JWTVerifyGetKey> | undefined;
  const keys = (): Promise<JWTVerifyGetKey> => {
    if (keySet !== undefined) return keySet;
    const pending = (options.jwksUri === undefined ? discoverJwksUri(options.issuer, dependencies) : Promise.resolve(options.jwksUri)).then((uri) => createRemoteJWKSet(new URL(uri)));
    keySet = pending;
    // A failed discovery is tried again by the next token, not remembered: the issuer may be back.
    pending.catch(() => {
      if (keySet === pending) keySet = undefined;
    });
    return pending;
  };
  return {
    async verify(token) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, async (header, input) => (await keys())(header, input), {
          issuer: options.issuer,
          audience: options.audience,
          requiredClaims: ['exp'],
          clockTolerance: options.clockToleranceSeconds,
          ...(options.algorithms === undefined ? {} : { algorithms: [...options.algorithms] }),
        }));
      } catch (error) {
        const refusal = describeRefusal(error, options);
        return refusal === undefined ? { ok: false, status: 503, description: describeOutage(error, options) } : { ok: false, status: 401, description: refusal };
      }
      const principal = payload[options.principalClaim];
      if (typeof principal !== 'string' || !USABLE_PRINCIPAL.test(principal)) {
        return { ok: false, status: 401, description: `The access token's \`${options.principalClaim}\` claim is not a usable principal: expected a string of 1 to 256 characters` };
      }
      return { ok: true, principal, scopes: scopesOf(payload) };
    },
  };
}
