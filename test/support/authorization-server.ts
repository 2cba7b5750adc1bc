import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, verify, type KeyObject } from 'node:crypto';

/** A stand-in OAuth authorization server on a loopback port: the `client_credentials` grant, nothing else. */
export interface AuthorizationServer {
  /** Its issuer (and base URL). */
  readonly issuer: string;
  /** Every request it was sent, in order, as `METHOD /path`. */
  readonly requests: readonly string[];
  /** Token requests, answered or refused, in order: how the client authenticated, and what came of it. */
  readonly tokenRequests: readonly { readonly method: 'client_secret_basic' | 'private_key_jwt' | 'none'; readonly granted: boolean }[];
  /** Whether `token` is one it issued that has not expired (on its `now`). */
  isValid(token: string): boolean;
  close(): Promise<void>;
}

/**
 * Starts an authorization server that grants `client_credentials` to `clientId`, authenticated with
 * `clientSecret` (`client_secret_basic`) or a JWT assertion (`private_key_jwt`) signed with the private
 * half of `publicKey` (ES256), each token good for `lifetimeSeconds` on `now` (a test's clock).
 */
export async function startAuthorizationServer(options: {
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly publicKey?: KeyObject;
  readonly lifetimeSeconds: number;
  readonly now: () => number;
}): Promise<AuthorizationServer> {
  const requests: string[] = [];
  const tokenRequests: { method: 'client_secret_basic' | 'private_key_jwt' | 'none'; granted: boolean }[] = [];
  const tokens = new Map<string, number>();
  let issuer = '';
  const http = createServer((request, response) => {
    void (async () => {
      const url = new URL(request.url ?? '/', issuer);
      requests.push(`${request.method ?? 'GET'} ${url.pathname}`);
      if (request.method === 'GET' && url.pathname.startsWith('/.well-known/oauth-authorization-server')) {
        response.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            issuer,
            authorization_endpoint: `${issuer}/authorize`,
            token_endpoint: `${issuer}/token`,
            response_types_supported: ['code'],
            grant_types_supported: ['client_credentials'],
            token_endpoint_auth_methods_supported: ['client_secret_basic', 'private_key_jwt'],
            token_endpoint_auth_signing_alg_values_supported: ['ES256'],
          }),
        );
        return;
      }
      if (request.method !== 'POST' || url.pathname !== '/token') {
        response.writeHead(404).end();
        return;
      }
      const form = new URLSearchParams(await bodyOf(request));
      const method = request.headers.authorization?.startsWith('Basic ') ? 'client_secret_basic' : form.has('client_assertion') ? 'private_key_jwt' : 'none';
      const granted =
        form.get('grant_type') === 'client_credentials' &&
        (method === 'client_secret_basic'
          ? basicMatches(request, options)
          : method === 'private_key_jwt' && assertionMatches(form.get('client_assertion') ?? '', issuer, options));
      tokenRequests.push({ method, granted });
      if (!granted) {
        response
          .writeHead(401, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'invalid_client', error_description: 'the client is not known, or its credentials are wrong' }));
        return;
      }
      const token = `at-${randomBytes(12).toString('hex')}`;
      tokens.set(token, options.now() + options.lifetimeSeconds * 1_000);
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ access_token: token, token_type: 'Bearer', expires_in: options.lifetimeSeconds }));
    })();
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return {
    issuer,
    requests,
    tokenRequests,
    isValid: (token) => (tokens.get(token) ?? Number.NEGATIVE_INFINITY) > options.now(),
    close: () =>
      new Promise((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}

async function bodyOf(request: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of request) body += String(chunk);
  return body;
}

function basicMatches(request: IncomingMessage, options: { readonly clientId: string; readonly clientSecret?: string }): boolean {
  const [id, secret] = Buffer.from((request.headers.authorization ?? '').slice('Basic '.length), 'base64')
    .toString('utf8')
    .split(':')
    .map(decodeURIComponent);
  return options.clientSecret !== undefined && id === options.clientId && secret === options.clientSecret;
}

/** An ES256 client assertion (RFC 7523): signed by the client's key, issued by and for the client, meant for this server. */
function assertionMatches(assertion: string, issuer: string, options: { readonly clientId: string; readonly publicKey?: KeyObject }): boolean {
  const [header = '', payload = '', signature = ''] = assertion.split('.');
  if (options.publicKey === undefined) return false;
  const signed = verify(
    'sha256',
    Buffer.from(`${header}.${payload}`),
    { key: options.publicKey, dsaEncoding: 'ieee-p1363' },
    Buffer.from(signature, 'base64url'),
  );
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { iss?: string; sub?: string; aud?: string | string[] };
  const audiences = [claims.aud ?? []].flat();
  return (
    signed &&
    claims.iss === options.clientId &&
    claims.sub === options.clientId &&
    audiences.some((audience) => [issuer, `${issuer}/token`].includes(audience.replace(/\/+$/, '')))
  );
}
