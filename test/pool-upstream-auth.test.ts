// `upstreams.<name>.auth`: OAuth client credentials for an HTTP upstream, through the v2 SDK's providers,
// against a stand-in authorization server and a 2026-07-28 upstream that is a protected resource, both on
// loopback ports. Tokens are renewed before they expire (on the pool's clock); no secret, key or token
// shows in what the pool reports.
import { generateKeyPairSync } from 'node:crypto';
import type { UpstreamAuth, UpstreamLogEntry } from '@klym/core';
import { describe, expect, it } from 'vitest';
import { startAuthorizationServer, type AuthorizationServer } from './support/authorization-server.ts';
import { createManualClock, type ManualClock } from './support/manual-clock.ts';
import { startMcp20260728Upstream, type Mcp20260728Upstream } from './support/mcp-2026-07-28-upstream.ts';
import { useCleanups } from './support/pool-cleanups.ts';

const cleanups = useCleanups();
const CLIENT_ID = 'klym-worker';
const CLIENT_SECRET = 'cs-7f3a9e1c5b2d4068';

interface Protected {
  readonly authorizationServer: AuthorizationServer;
  readonly upstream: Mcp20260728Upstream;
  readonly clock: ManualClock;
}

/** An authorization server issuing tokens good for a minute of `clock`, and an upstream that takes only its tokens. */
async function protectedUpstream(credentials: {
  readonly clientSecret?: string;
  readonly publicKey?: ReturnType<typeof generateKeyPairSync>['publicKey'];
}): Promise<Protected> {
  const clock = createManualClock();
  const authorizationServer = await startAuthorizationServer({ clientId: CLIENT_ID, ...credentials, lifetimeSeconds: 60, now: clock.now });
  cleanups.add(() => authorizationServer.close());
  const upstream = await startMcp20260728Upstream({ authorizationServer });
  cleanups.add(() => upstream.close());
  return { authorizationServer, upstream, clock };
}

function textOf(result: { content?: unknown }): string {
  return (result.content as { text?: string }[]).map((item) => item.text ?? '').join('');
}

describe('upstreams.<name>.auth', () => {
  it('client_credentials with a secret: a token on the first 401, then renewed before it expires, never after a refusal', async () => {
    const { authorizationServer, upstream, clock } = await protectedUpstream({ clientSecret: CLIENT_SECRET });
    // Pinned to its authorization server: the upstream's metadata could not send the secret anywhere else.
    const auth: UpstreamAuth = { type: 'client_credentials', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, issuer: authorizationServer.issuer };
    const pool = await cleanups.pooled({ upstreams: { mcp20260728: { url: upstream.url, auth } }, clock });

    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'one' }))).toBe('echo: one');
    expect(pool.status().mcp20260728).toMatchObject({ state: 'ready', protocolVersion: '2026-07-28' });
    expect(authorizationServer.tokenRequests).toEqual([{ method: 'client_secret_basic', granted: true }]);
    // The one refusal: the first request, before there was a token (it names the metadata, which names the server).
    expect(upstream.unauthorized).toEqual(['']);

    // 50 s into a 60 s token: in its last fifth, so the next request waits for a new one.
    clock.advance(50_000);
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'two' }))).toBe('echo: two');
    expect(authorizationServer.tokenRequests).toHaveLength(2);
    // 70 s: the first token has expired, the second has not; nothing was refused meanwhile.
    clock.advance(20_000);
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'three' }))).toBe('echo: three');
    expect(upstream.unauthorized).toEqual(['']);
    expect(authorizationServer.tokenRequests).toHaveLength(2);
  });

  it('an authorization server down when a token is due: the token still good serves until it expires, then calls fail naming the upstream', async () => {
    const { authorizationServer, upstream, clock } = await protectedUpstream({ clientSecret: CLIENT_SECRET });
    const auth: UpstreamAuth = { type: 'client_credentials', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, issuer: authorizationServer.issuer };
    const pool = await cleanups.pooled({ upstreams: { mcp20260728: { url: upstream.url, auth } }, clock });
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'one' }))).toBe('echo: one');

    await authorizationServer.close();
    clock.advance(50_000);
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'still' }))).toBe('echo: still');
    clock.advance(11_000);
    await expect(pool.callTool('mcp20260728', 'echo', { message: 'expired' })).rejects.toMatchObject({
      upstream: 'mcp20260728',
      message: expect.stringContaining('Upstream "mcp20260728"'),
    });
    expect(authorizationServer.tokenRequests).toHaveLength(1);
  });

  it('private_key_jwt: a signed assertion in place of a secret, its algorithm (ES256) read from the key', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { authorizationServer, upstream, clock } = await protectedUpstream({ publicKey });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const pool = await cleanups.pooled({
      upstreams: {
        mcp20260728: { url: upstream.url, auth: { type: 'private_key_jwt', clientId: CLIENT_ID, privateKey: pem, issuer: authorizationServer.issuer } },
      },
      clock,
    });

    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'signed' }))).toBe('echo: signed');
    expect(authorizationServer.tokenRequests).toEqual([{ method: 'private_key_jwt', granted: true }]);
    clock.advance(55_000);
    expect(textOf(await pool.callTool('mcp20260728', 'echo', { message: 'again' }))).toBe('echo: again');
    expect(authorizationServer.tokenRequests).toEqual([
      { method: 'private_key_jwt', granted: true },
      { method: 'private_key_jwt', granted: true },
    ]);
  });

  it('a refused secret: the upstream is reported unavailable, and no secret, key or token shows in errors, status or logs', async () => {
    const { authorizationServer, upstream, clock } = await protectedUpstream({ clientSecret: CLIENT_SECRET });
    const { issuer } = authorizationServer;
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const logged: UpstreamLogEntry[] = [];
    const wrongSecret = 'cs-wrong-0123456789';
    const pool = await cleanups.pooled({
      upstreams: {
        wrong: { url: upstream.url, auth: { type: 'client_credentials', clientId: CLIENT_ID, clientSecret: wrongSecret, issuer }, pool: { min: 0 } },
        keyed: { url: upstream.url, auth: { type: 'private_key_jwt', clientId: CLIENT_ID, privateKey: pem, issuer }, pool: { min: 0 } },
        good: { url: upstream.url, auth: { type: 'client_credentials', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, issuer }, pool: { min: 0 } },
      },
      clock,
      onLog: (entry) => logged.push(entry),
    });

    const errors = await Promise.all(['wrong', 'keyed'].map((name) => pool.callTool(name, 'echo', { message: 'x' }).catch((error: unknown) => error as Error)));
    for (const error of errors)
      expect(error).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', message: expect.stringMatching(/is unavailable: connect over streamable-http failed/) });
    expect(errors[0]?.message).toContain('the client is not known, or its credentials are wrong');
    expect(textOf(await pool.callTool('good', 'echo', { message: 'fine' }))).toBe('echo: fine');

    const tokens = upstream.requests.map((request) => request.headers.authorization?.replace(/^Bearer /, '')).filter((token) => token !== undefined);
    expect(tokens.length).toBeGreaterThan(0);
    const shown = JSON.stringify({ errors: errors.map((error) => [error.message, String(error.cause)]), status: pool.status(), logged });
    const keyLine = pem.split('\n')[1] as string;
    for (const secret of [wrongSecret, CLIENT_SECRET, keyLine, ...tokens]) expect(shown).not.toContain(secret);
  });

  it('is refused for a stdio upstream, and names what is wrong with a key without showing it', async () => {
    const { createSessionPool } = await import('@klym/core');
    await expect(
      createSessionPool({
        upstreams: {
          local: { command: 'node', auth: { type: 'client_credentials', clientId: 'a', clientSecret: 'b-secret', issuer: 'https://auth.example' } },
        },
      }),
    ).rejects.toThrow('Upstream "local": `auth` needs a `url`');
    const bad = '-----BEGIN PRIVATE KEY-----\nbm90LWEta2V5LWF0LWFsbA==\n-----END PRIVATE KEY-----\n';
    const opening = createSessionPool({
      upstreams: {
        signed: { url: 'http://127.0.0.1:9/mcp', auth: { type: 'private_key_jwt', clientId: 'a', privateKey: bad, issuer: 'https://auth.example' } },
      },
    });
    const error = (await opening.then(
      () => undefined,
      (caught: unknown) => caught,
    )) as Error;
    expect(error).toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('Upstream "signed": expected `auth.privateKey` to be a PEM private key'),
    });
    expect(error.message).not.toContain('bm90LWEta2V5LWF0LWFsbA');
  });

  it('needs the issuer: a pool without one, or with a plain-http one off loopback, does not open, naming `auth.issuer`', async () => {
    const { createSessionPool } = await import('@klym/core');
    const secret = { type: 'client_credentials', clientId: 'a', clientSecret: 'b-secret' } as const;
    for (const issuer of [undefined, 'http://auth.example', 'ftp://auth.example', 'https://auth.example/?tenant=a']) {
      const auth = { ...secret, ...(issuer === undefined ? {} : { issuer }) } as UpstreamAuth;
      await expect(createSessionPool({ upstreams: { remote: { url: 'https://mcp.example/mcp', auth, pool: { min: 0 } } } })).rejects.toMatchObject({
        code: 'CONFIG_INVALID',
        message: expect.stringMatching(
          /^Upstream "remote": expected `auth\.issuer` to be the https URL of the authorization server the client is registered with \(http only on loopback/,
        ),
      });
    }
    for (const issuer of ['https://auth.example/realms/klym', 'http://127.0.0.2:8080', 'http://[::1]:8080', 'http://localhost:8080']) {
      const pool = await createSessionPool({ upstreams: { remote: { url: 'https://mcp.example/mcp', auth: { ...secret, issuer }, pool: { min: 0 } } } });
      await pool.close();
    }
  });

  it('an upstream naming another authorization server than `issuer`: refused before either is asked, so the secret goes nowhere', async () => {
    const { authorizationServer: named, upstream, clock } = await protectedUpstream({ clientSecret: CLIENT_SECRET });
    const configured = await startAuthorizationServer({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, lifetimeSeconds: 60, now: clock.now });
    cleanups.add(() => configured.close());
    const auth: UpstreamAuth = { type: 'client_credentials', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, issuer: configured.issuer };
    const pool = await cleanups.pooled({ upstreams: { mcp20260728: { url: upstream.url, auth, pool: { min: 0 } } }, clock });

    const error = (await pool.callTool('mcp20260728', 'echo', { message: 'x' }).catch((caught: unknown) => caught)) as Error;
    // The server the upstream named heard nothing, not even a metadata request; the configured one was sent no token request.
    expect(named.requests).toEqual([]);
    expect(configured.tokenRequests).toEqual([]);
    expect(error).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'mcp20260728' });
    expect(error.message).toContain(`names the authorization server ${named.issuer}, not the configured \`auth.issuer\` ${configured.issuer}`);
    expect(upstream.requests.some((request) => request.headers.authorization !== undefined)).toBe(false);
  });
});
