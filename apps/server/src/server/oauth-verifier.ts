import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { IssuerUnavailableError, discoverJwksUri } from './oauth-discovery.ts';
import { USABLE_PRINCIPAL, type ResolvedOAuthOptions } from './oauth-options.ts';

/** What a bearer token turned out to be: a caller and its scopes, or why not (never the token itself). */
export type AccessTokenCheck =
  | { readonly ok: true; readonly principal: string; readonly scopes: readonly string[] }
  /** 401: the token is not one Klym takes. 503: its issuer's keys cannot be had now; the token may be fine. */
  | { readonly ok: false; readonly status: 401 | 503; readonly description: string };

/** Checks JWT access tokens of one issuer. */
export interface AccessTokenVerifier {
  /** Verifies `token`'s `typ`, its signature against the issuer's keys, then its `iss`, `aud`, `exp`/`nbf` and principal claim. Never throws. */
  verify(token: string): Promise<AccessTokenCheck>;
}

/** The principal of a caller where there is no auth (and over stdio), whose tasks may share the store. */
const ANONYMOUS = 'anonymous';

/** The `typ` of a JWT access token (RFC 9068 §2.1), as a media type or without its `application/`. */
const ACCESS_TOKEN_TYPES = new Set(['at+jwt', 'application/at+jwt']);

/** Why a token was refused before its keys were looked up: its `typ` header says it is another kind of JWT. */
class TokenTypeRefused extends Error {
  override readonly name = 'TokenTypeRefused';
  readonly typ: unknown;
  constructor(typ: unknown) {
    super('not an access token');
    this.typ = typ;
  }
}

/** `typ` said back to the caller when it is short and plain (an ID token's `JWT`); anything else is not repeated. */
const shownType = (typ: unknown): string => (typeof typ === 'string' && /^[\w.+/-]{1,40}$/.test(typ) ? `\`${typ}\`` : 'another');

/** The granted scopes: RFC 9068's `scope` (space-separated), or `scp` (a list or a string) as Azure and Okta send them. */
function scopesOf(payload: JWTPayload): string[] {
  const listed = [payload.scope, payload.scp].flatMap((value) => (typeof value === 'string' ? value.split(' ') : Array.isArray(value) ? value : []));
  return [...new Set(listed.filter((scope): scope is string => typeof scope === 'string' && scope !== ''))];
}

/** Why `error` refused a token, said so the caller can act, with nothing of the token in it; or undefined when it is not the token's fault. */
function describeRefusal(error: unknown, options: ResolvedOAuthOptions): string | undefined {
  if (error instanceof TokenTypeRefused) {
    return `The bearer token is not an access token: its \`typ\` header is ${shownType(error.typ)}, not \`at+jwt\` (RFC 9068); an ID token is not taken`;
  }
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
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
    return `The access token is not signed by a key ${options.issuer} publishes`;
  // An HMAC `alg` lands here: a JWK Set holds public keys only, so a token signed with a shared secret is never taken.
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported)
    return 'The access token uses a signature algorithm or header Klym does not accept';
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
 * whose header has a `typ` must say `at+jwt` (RFC 9068: an ID token, typed `JWT`, is refused); it must carry
 * `exp`; `aud` must include `options.audience` (RFC 8707: a token another resource was given is refused
 * here). The principal is the `principalClaim`, a string, or the principal `options.principals` grants it;
 * one that names a principal of `staticPrincipals`, `anonymous` or a principal granted in `principals`, and
 * is not granted it, is refused: access tokens and static tokens never share a principal unless granted.
 */
export function createAccessTokenVerifier(
  options: ResolvedOAuthOptions,
  dependencies: { readonly staticPrincipals?: readonly string[]; readonly fetch?: typeof fetch } = {},
): AccessTokenVerifier {
  const granted = new Map(Object.entries(options.principals));
  const reserved = new Set([ANONYMOUS, ...(dependencies.staticPrincipals ?? []), ...granted.values()]);
  let keySet: Promise<JWTVerifyGetKey> | undefined;
  const keys = (): Promise<JWTVerifyGetKey> => {
    if (keySet !== undefined) return keySet;
    const pending = (options.jwksUri === undefined ? discoverJwksUri(options.issuer, dependencies) : Promise.resolve(options.jwksUri)).then((uri) =>
      createRemoteJWKSet(new URL(uri)),
    );
    keySet = pending;
    // A failed discovery is tried again by the next token, not remembered: the issuer may be back.
    pending.catch(() => {
      if (keySet === pending) keySet = undefined;
    });
    return pending;
  };
  const keyOf: JWTVerifyGetKey = async (header, input) => {
    // Checked before the keys are looked up: a token of another kind costs the issuer nothing.
    const typ: unknown = header.typ;
    if (typ !== undefined && !(typeof typ === 'string' && ACCESS_TOKEN_TYPES.has(typ.toLowerCase()))) throw new TokenTypeRefused(typ);
    return (await keys())(header, input);
  };
  return {
    async verify(token) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keyOf, {
          issuer: options.issuer,
          audience: options.audience,
          requiredClaims: ['exp'],
          clockTolerance: options.clockToleranceSeconds,
          ...(options.algorithms === undefined ? {} : { algorithms: [...options.algorithms] }),
        }));
      } catch (error) {
        const refusal = describeRefusal(error, options);
        return refusal === undefined
          ? { ok: false, status: 503, description: describeOutage(error, options) }
          : { ok: false, status: 401, description: refusal };
      }
      const claimed = payload[options.principalClaim];
      if (typeof claimed !== 'string' || !USABLE_PRINCIPAL.test(claimed)) {
        return {
          ok: false,
          status: 401,
          description: `The access token's \`${options.principalClaim}\` claim is not a usable principal: expected a string of 1 to 256 characters`,
        };
      }
      const grant = granted.get(claimed);
      if (grant !== undefined) return { ok: true, principal: grant, scopes: scopesOf(payload) };
      if (reserved.has(claimed)) {
        const description =
          `The access token's \`${options.principalClaim}\` claim names a principal kept for other callers (a static token's, \`anonymous\`, or one granted ` +
          'to another subject), which an access token acts as only where `oauth.principals` grants it';
        return { ok: false, status: 401, description };
      }
      return { ok: true, principal: claimed, scopes: scopesOf(payload) };
    },
  };
}
