import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWTPayload } from 'jose';

/** An OpenID Connect issuer stand-in on a loopback port: discovery, a JWK Set, and a way to sign tokens. */
export interface OidcIssuer extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`: its issuer identifier. */
  readonly issuer: string;
  /** How many times each path was asked for. */
  readonly requests: ReadonlyMap<string, number>;
  /**
   * A signed access token of `claims` (`iss` is the issuer's and `exp` an hour away unless given; `null`
   * leaves a claim out), by the issuer's published key, or by `foreignKey`, one it does not publish; its
   * header's `typ` is `at+jwt` (RFC 9068) unless `typ` says otherwise (`null`: none).
   */
  sign(claims: Readonly<Record<string, unknown>>, options?: { readonly foreignKey?: boolean; readonly typ?: string | null }): Promise<string>;
  /** Stops answering (the socket closes): the issuer is down. Idempotent. */
  close(): Promise<void>;
}

const KID = 'stand-in-1';

/** Starts the stand-in; `alg` is its signing algorithm. */
export async function startOidcIssuer(alg: 'RS256' | 'ES256' = 'RS256'): Promise<OidcIssuer> {
  const published = await generateKeyPair(alg);
  const foreign = await generateKeyPair(alg);
  const jwks = { keys: [{ ...(await exportJWK(published.publicKey)), kid: KID, alg, use: 'sig' }] };
  const requests = new Map<string, number>();
  let issuer = '';
  const server: Server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', issuer).pathname;
    requests.set(path, (requests.get(path) ?? 0) + 1);
    const body =
      path === '/.well-known/openid-configuration'
        ? { issuer, jwks_uri: `${issuer}/jwks`, response_types_supported: ['code'], id_token_signing_alg_values_supported: [alg] }
        : path === '/jwks'
          ? jwks
          : undefined;
    response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? { error: 'not_found' }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closing: Promise<void> | undefined;
  const stand: OidcIssuer = {
    issuer,
    requests,
    async sign(claims, options = {}) {
      const key: CryptoKey = options.foreignKey === true ? foreign.privateKey : published.privateKey;
      const now = Math.floor(Date.now() / 1000);
      const payload: Record<string, unknown> = { iss: issuer, iat: now, exp: now + 3600, ...claims };
      for (const [name, value] of Object.entries(payload)) if (value === null) delete payload[name];
      const typ = options.typ === undefined ? 'at+jwt' : options.typ;
      return new SignJWT(payload as JWTPayload).setProtectedHeader({ alg, kid: KID, ...(typ === null ? {} : { typ }) }).sign(key);
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
    [Symbol.asyncDispose]: () => stand.close(),
  };
  return stand;
}
