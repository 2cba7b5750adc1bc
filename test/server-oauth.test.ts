// Klym as an OAuth 2.1 resource server, over real HTTP: an OIDC issuer stand-in on a loopback port publishes
// its keys, and a real Klym server takes its JWT access tokens beside a static token.
import { createSessionPool, type SessionPool } from '@klym/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKlymServer, type KlymServerOptions, type RunningKlymServer } from '../apps/server/src/server/index.ts';
import { startOidcIssuer, type OidcIssuer } from './support/oidc-issuer.ts';
import { payload } from './support/server-harness.ts';
import { floodingRunner, quickRunner } from './support/server-runners.ts';

const RESOURCE = 'https://klym.example/mcp';
const METADATA_URL = 'https://klym.example/.well-known/oauth-protected-resource/mcp';
const STATIC = 'static-token-of-ops-0123456789';
const EVERY_SCOPE = 'klym:start klym:read klym:cancel';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** A Klym server on a free loopback port with `oauth` beside `tokens` (the static token `ops`), its runs the quick stand-in. */
async function klymWith(
  oauth: NonNullable<KlymServerOptions['auth']>['oauth'],
  log: (line: string) => void = () => {},
  tokens: Record<string, string> = { ops: STATIC },
): Promise<RunningKlymServer> {
  const pool: SessionPool = await createSessionPool({ upstreams: {} });
  const server = await startKlymServer({ port: 0, pool, log, auth: { tokens, oauth }, tasks: { run: quickRunner, shutdownGraceMs: 0 } });
  cleanups.push(
    () => pool.close(),
    () => server.close(),
  );
  return server;
}

let issuer: OidcIssuer;
let klym: RunningKlymServer;
const logged: string[] = [];
beforeAll(async () => {
  issuer = await startOidcIssuer('RS256');
  cleanups.push(() => issuer.close());
  klym = await klymWith({ issuer: issuer.issuer, resource: RESOURCE }, (line) => logged.push(line));
});

/** An access token of the stand-in for Klym's resource: `alice`'s with every scope unless `claims` say otherwise. */
const tokenFor = (claims: Record<string, unknown> = {}, options?: { foreignKey?: boolean; typ?: string | null }): Promise<string> =>
  issuer.sign({ aud: RESOURCE, sub: 'alice', scope: EVERY_SCOPE, ...claims }, options);

/** A request to `server` (Klym's by default) with `token` as its bearer. */
const call = (path: string, token?: string, init: { method?: string; body?: unknown } = {}, server: RunningKlymServer = klym): Promise<Response> =>
  fetch(`${server.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });

/** The `WWW-Authenticate` parameters of a response, by name. */
function challengeOf(response: Response): Record<string, string> {
  const header = response.headers.get('www-authenticate') ?? '';
  expect(header).toMatch(/^Bearer /);
  return Object.fromEntries([...header.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1] as string, match[2] as string]));
}

/** The official MCP client over Streamable HTTP, with `token` in every request. */
async function mcpClient(token: string): Promise<Client> {
  const client = new Client({ name: 'grynya', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(klym.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  cleanups.push(() => client.close());
  return client;
}

describe('the protected resource metadata (RFC 9728)', () => {
  it('is served without a token, at the root and under the resource path a 401 names', async () => {
    const expected = {
      resource: RESOURCE,
      authorization_servers: [issuer.issuer],
      scopes_supported: ['klym:start', 'klym:read', 'klym:cancel'],
      bearer_methods_supported: ['header'],
    };
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const response = await call(path);
      expect({ path, status: response.status }).toEqual({ path, status: 200 });
      expect(await response.json()).toEqual(expected);
    }
  });

  it('is named by the 401 of a request without a token, which says no more (RFC 6750 §3.1)', async () => {
    for (const [path, init] of [
      ['/api/tasks', {}],
      ['/mcp', { method: 'POST', body: { jsonrpc: '2.0', id: 1, method: 'ping' } }],
    ] as const) {
      const response = await call(path, undefined, init);
      expect(response.status).toBe(401);
      expect(challengeOf(response)).toEqual({ realm: 'klym', resource_metadata: METADATA_URL });
      expect(await response.json()).toEqual({ error: { code: 'UNAUTHORIZED', message: 'A bearer token is required in the Authorization header' } });
    }
  });
});

describe('a valid access token', () => {
  it('starts a task over REST as its `sub`, whose task another principal cannot read', async () => {
    const alice = await tokenFor();
    const started = await call('/api/tasks', alice, { method: 'POST', body: { prompt: 'hello' } });
    expect(started.status).toBe(202);
    const { task_id: taskId } = (await started.json()) as { task_id: string };
    expect((await call(`/api/tasks/${taskId}`, alice)).status).toBe(200);
    expect((await call(`/api/tasks/${taskId}`, await tokenFor({ sub: 'bob' }))).status).toBe(404);
    expect((await call(`/api/tasks/${taskId}`, STATIC)).status).toBe(404);
    // The request log names the claim's principal, never the token.
    expect(logged.some((line) => line.includes('(alice)'))).toBe(true);
    expect(logged.join('\n')).not.toContain(alice);
  });

  it('starts a task over MCP (the SDK client, Streamable HTTP) that REST reads as the same principal’s, and nobody else’s', async () => {
    const alice = await tokenFor();
    const client = await mcpClient(alice);
    const started = payload(await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'over mcp' } }));
    const taskId = String(started.task_id);
    expect(payload(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } }))).toMatchObject({ task_id: taskId });
    expect((await call(`/api/tasks/${taskId}`, alice)).status).toBe(200);
    const bob = await mcpClient(await tokenFor({ sub: 'bob' }));
    const foreign = await bob.callTool({ name: 'check_task_status', arguments: { task_id: taskId } });
    expect(foreign.isError).toBe(true);
    expect(JSON.stringify(foreign.content)).toContain('TASK_NOT_FOUND');
  });

  it('takes scopes from `scp` as a list too, and the issuer’s keys are fetched once for every route', async () => {
    const listed = await tokenFor({ scope: null, scp: ['klym:start', 'klym:read'] });
    expect((await call('/api/tasks', listed, { method: 'POST', body: { prompt: 'scp' } })).status).toBe(202);
    expect((await call('/metrics', listed)).status).toBe(200);
    expect(issuer.requests.get('/.well-known/openid-configuration')).toBe(1);
    expect(issuer.requests.get('/jwks')).toBe(1);
  });

  it('is typed `at+jwt` (RFC 9068), `application/at+jwt`, in any case, or not typed at all', async () => {
    for (const typ of ['application/at+jwt', 'AT+JWT', null]) {
      expect({ typ, status: (await call('/api/tasks', await tokenFor({}, { typ }))).status }).toEqual({ typ, status: 200 });
    }
  });

  it('leaves the static token working beside OAuth, with every scope', async () => {
    const started = await call('/api/tasks', STATIC, { method: 'POST', body: { prompt: 'static' } });
    expect(started.status).toBe(202);
    const { task_id: taskId } = (await started.json()) as { task_id: string };
    expect((await call(`/api/tasks/${taskId}/cancel`, STATIC, { method: 'POST' })).status).toBe(200);
  });
});

/**
 * The description of the 401 `invalid_token` that `token` gets, checked to be the same in the header and the
 * body, and to hold nothing of the token.
 */
async function refusalOf(token: string): Promise<string | undefined> {
  const response = await call('/api/tasks', token);
  expect(response.status).toBe(401);
  const challenge = challengeOf(response);
  expect(challenge).toMatchObject({ error: 'invalid_token', resource_metadata: METADATA_URL });
  const body = (await response.json()) as { error: { code: string; message: string } };
  expect(body.error).toEqual({ code: 'UNAUTHORIZED', message: challenge.error_description });
  for (const part of token.split('.')) expect(JSON.stringify(body) + JSON.stringify([...response.headers])).not.toContain(part);
  return challenge.error_description;
}

describe('a token Klym does not take', () => {
  it('expired (past the clock tolerance): 401 invalid_token saying when', async () => {
    const now = Math.floor(Date.now() / 1000);
    expect(await refusalOf(await tokenFor({ iat: now - 3600, exp: now - 120 }))).toMatch(/^The access token expired at \d{4}-\d\d-\d\dT/);
  });

  it('for another audience: 401 naming the audience it must have (RFC 8707)', async () => {
    expect(await refusalOf(await tokenFor({ aud: 'https://other-resource.example/mcp' }))).toMatch(/its audience must include https:\/\/klym\.example\/mcp/);
  });

  it('from another issuer, or signed by a key the issuer does not publish: 401', async () => {
    expect(await refusalOf(await tokenFor({ iss: 'https://impostor.example' }))).toMatch(/not issued by http:\/\/127\.0\.0\.1:\d+/);
    expect(await refusalOf(await tokenFor({}, { foreignKey: true }))).toMatch(/signature does not verify/);
    const hmac = await new SignJWT({ aud: RESOURCE, sub: 'alice', iss: issuer.issuer, scope: EVERY_SCOPE })
      .setProtectedHeader({ alg: 'HS256', kid: 'stand-in-1' })
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode('a-shared-secret-an-attacker-picked'));
    expect(await refusalOf(hmac)).toMatch(/signature algorithm or header Klym does not accept/);
  });

  it('typed as another kind of JWT (an ID token’s `JWT`): 401 saying it is not an access token', async () => {
    const expected = 'The bearer token is not an access token: its `typ` header is `JWT`, not `at+jwt` (RFC 9068); an ID token is not taken';
    expect(await refusalOf(await tokenFor({}, { typ: 'JWT' }))).toBe(expected);
    expect(await refusalOf(await tokenFor({}, { typ: 'application/jwt' }))).toMatch(/its `typ` header is `application\/jwt`, not `at\+jwt`/);
    expect(await refusalOf(await tokenFor({}, { typ: 'x'.repeat(100) }))).toMatch(/its `typ` header is another, not `at\+jwt`/);
  });

  it('without a usable principal claim, without `exp`, or not a JWT at all: 401', async () => {
    expect(await refusalOf(await tokenFor({ sub: null }))).toMatch(/`sub` claim is not a usable principal/);
    expect(await refusalOf(await tokenFor({ sub: 42 }))).toMatch(/`sub` claim is not a usable principal/);
    expect(await refusalOf(await tokenFor({ exp: null }))).toMatch(/has no `exp` claim/);
    expect(await refusalOf('not-a-static-token-nor-a-jwt')).toMatch(/not a JWT access token/);
  });
});

/** Expects 403 `insufficient_scope` naming `needed` among the scopes to ask for. */
async function expectForbidden(response: Response, needed: string): Promise<void> {
  expect(response.status).toBe(403);
  const challenge = challengeOf(response);
  expect(challenge).toMatchObject({ error: 'insufficient_scope', resource_metadata: METADATA_URL });
  expect(challenge.scope?.split(' ')).toContain(needed);
  expect(((await response.json()) as { error: { message: string } }).error.message).toContain(needed);
}

describe('scopes', () => {
  it('REST: a read-only token reads but gets 403 starting or cancelling, naming the scope it lacks and keeping the one it has', async () => {
    const reader = await tokenFor({ scope: 'klym:read' });
    expect((await call('/api/tasks', reader)).status).toBe(200);
    const start = await call('/api/tasks', reader, { method: 'POST', body: { prompt: 'no' } });
    await expectForbidden(start.clone(), 'klym:start');
    expect(challengeOf(start).scope).toBe('klym:read klym:start');
    const started = (await (await call('/api/tasks', await tokenFor(), { method: 'POST', body: { prompt: 'mine' } })).json()) as { task_id: string };
    await expectForbidden(await call(`/api/tasks/${started.task_id}/cancel`, reader, { method: 'POST' }), 'klym:cancel');
  });

  it('MCP: the tool called decides; a token without `klym:start` connects and reads, and its start is a 403', async () => {
    const reader = await mcpClient(await tokenFor({ scope: 'klym:read' }));
    expect((await reader.listTools()).tools.map((tool) => tool.name)).toContain('start_async_agent_task');
    expect(payload(await reader.callTool({ name: 'list_agent_tasks', arguments: {} }))).toHaveProperty('tasks');
    const refusal = reader.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'no' } });
    await expect(refusal).rejects.toMatchObject({ code: 403 });
    await expect(refusal).rejects.toThrow(/insufficient|klym:start/);

    const starter = await mcpClient(await tokenFor({ scope: 'klym:start' }));
    const taskId = String(payload(await starter.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'start only' } })).task_id);
    await expect(starter.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).rejects.toMatchObject({ code: 403 });
    await expect(starter.callTool({ name: 'cancel_agent_task', arguments: { task_id: taskId } })).rejects.toMatchObject({ code: 403 });
  });

  it('legacy SSE: the message posted decides, as on /mcp', async () => {
    const client = new Client({ name: 'grynya', version: '1.0.0' });
    await client.connect(
      new SSEClientTransport(new URL(klym.sseUrl), { requestInit: { headers: { Authorization: `Bearer ${await tokenFor({ scope: 'klym:read' })}` } } }),
    );
    cleanups.push(() => client.close());
    expect(payload(await client.callTool({ name: 'list_agent_tasks', arguments: {} }))).toHaveProperty('tasks');
    await expect(client.callTool({ name: 'start_async_agent_task', arguments: { prompt: 'no' } })).rejects.toThrow(/403.*klym:start/s);
  });

  it('MCP: a batch needs what each of its messages needs', async () => {
    const reader = await tokenFor({ scope: 'klym:read' });
    const opened = await fetch(klym.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${reader}` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    });
    expect(opened.status).toBe(200);
    const session = opened.headers.get('mcp-session-id') as string;
    const batch = [
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_agent_tasks', arguments: {} } },
      { jsonrpc: '2.0', id: 3, method: 'tasks/cancel', params: { taskId: 'x' } },
    ];
    const response = await fetch(klym.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${reader}`,
        'mcp-session-id': session,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify(batch),
    });
    await expectForbidden(response, 'klym:cancel');
  });
});

describe('the issuer', () => {
  it('down before Klym has its keys: a JWT gets 503 naming the issuer, and the server keeps serving', async () => {
    const gone = await startOidcIssuer('ES256');
    const token = await gone.sign({ aud: RESOURCE, sub: 'carol', scope: EVERY_SCOPE });
    await gone.close();
    const lines: string[] = [];
    const server = await klymWith({ issuer: gone.issuer, resource: RESOURCE }, (line) => lines.push(line));
    const response = await call('/api/tasks', token, {}, server);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('AUTH_UNAVAILABLE');
    expect(body.error.message).toContain(`could not reach the issuer ${gone.issuer}`);
    expect(JSON.stringify(body) + lines.join('\n')).not.toContain(token);
    expect((await call('/healthz', undefined, {}, server)).status).toBe(200);
    expect((await call('/api/tasks', STATIC, {}, server)).status).toBe(200);
    // A token that is not even a JWT is still a 401, whatever the issuer's state.
    expect((await call('/api/tasks', 'garbage', {}, server)).status).toBe(401);
  });

  it('down after Klym has its keys: tokens signed by a key it holds keep working', async () => {
    const flaky = await startOidcIssuer('RS256');
    const server = await klymWith({ issuer: flaky.issuer, resource: RESOURCE });
    const sign = (sub: string) => flaky.sign({ aud: RESOURCE, sub, scope: EVERY_SCOPE });
    expect((await call('/api/tasks', await sign('erin'), {}, server)).status).toBe(200);
    const later = await sign('frank');
    await flaky.close();
    expect((await call('/api/tasks', later, {}, server)).status).toBe(200);
  });

  it('with `jwksUri` given, its metadata is never asked for; an ES256 issuer works as an RS256 one does', async () => {
    const other = await startOidcIssuer('ES256');
    cleanups.push(() => other.close());
    const server = await klymWith({ issuer: other.issuer, resource: RESOURCE, jwksUri: `${other.issuer}/jwks`, principalClaim: 'email' });
    const token = await other.sign({ aud: RESOURCE, sub: 'ignored', email: 'dana@example.com', scope: EVERY_SCOPE });
    const started = await call('/api/tasks', token, { method: 'POST', body: { prompt: 'es256' } }, server);
    expect(started.status).toBe(202);
    const { task_id: taskId } = (await started.json()) as { task_id: string };
    expect(
      (await call(`/api/tasks/${taskId}`, await other.sign({ aud: RESOURCE, sub: 'another', email: 'dana@example.com', scope: 'klym:read' }), {}, server))
        .status,
    ).toBe(200);
    expect(
      (await call(`/api/tasks/${taskId}`, await other.sign({ aud: RESOURCE, sub: 'ignored', email: 'eve@example.com', scope: 'klym:read' }), {}, server))
        .status,
    ).toBe(404);
    expect(other.requests.get('/.well-known/openid-configuration')).toBeUndefined();
    expect(other.requests.get('/jwks')).toBe(1);
  });
});

describe('the principals of static tokens', () => {
  const GRYNYA = 'static-token-of-grynya-0123456789';
  const GRANTED = 'grynya-at-the-issuer';
  let server: RunningKlymServer;
  let taskId: string;
  beforeAll(async () => {
    const pool = await createSessionPool({ upstreams: {} });
    // Runs that wait until cancelled: a cancel that went through shows as `cancelled`.
    server = await startKlymServer({
      port: 0,
      pool,
      log: () => {},
      auth: {
        tokens: { ops: STATIC, grynya: GRYNYA },
        oauth: { issuer: issuer.issuer, resource: RESOURCE, principals: { [GRANTED]: 'grynya', 'carol-at-the-issuer': 'carol' } },
      },
      tasks: { run: floodingRunner(0), shutdownGraceMs: 0 },
    });
    cleanups.push(
      () => pool.close(),
      () => server.close(),
    );
    const started = await call('/api/tasks', GRYNYA, { method: 'POST', body: { prompt: 'static grynya' } }, server);
    if (started.status !== 202) throw new Error(`the static grynya could not start a task: ${started.status} ${await started.text()}`);
    ({ task_id: taskId } = (await started.json()) as { task_id: string });
  });

  /** The status of grynya's task, as its static token reads it. */
  const statusOf = async (): Promise<string> => ((await (await call(`/api/tasks/${taskId}`, GRYNYA, {}, server)).json()) as { status: string }).status;

  it('are not an access token’s: a JWT whose `sub` is `grynya` neither reads, lists nor cancels the static grynya’s task (401)', async () => {
    const impostor = await tokenFor({ sub: 'grynya' });
    const expected = /^The access token's `sub` claim names a principal kept for other callers/;
    for (const [path, init] of [
      [`/api/tasks/${taskId}`, {}],
      ['/api/tasks', {}],
      [`/api/tasks/${taskId}/cancel`, { method: 'POST' }],
    ] as const) {
      const response = await call(path, impostor, init, server);
      const body = (await response.json()) as { error?: { code: string; message: string } };
      expect({ path, status: response.status, code: body.error?.code }).toEqual({ path, status: 401, code: 'UNAUTHORIZED' });
      expect(body.error?.message).toMatch(expected);
      expect(challengeOf(response)).toMatchObject({ error: 'invalid_token' });
    }
    expect(await statusOf()).not.toBe('cancelled');
    // Over MCP too: the connect itself is refused.
    const client = new Client({ name: 'impostor', version: '1.0.0' });
    await expect(
      client.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${impostor}` } } })),
    ).rejects.toThrow(/401|principal kept for other callers/);
  });

  it('nor is `anonymous`, the caller without auth, whose tasks may share the store, nor a principal granted to another subject', async () => {
    expect((await call('/api/tasks', await tokenFor({ sub: 'anonymous' }), {}, server)).status).toBe(401);
    expect((await call('/api/tasks', await tokenFor({ sub: 'carol' }), {}, server)).status).toBe(401);
    expect((await call('/api/tasks', await tokenFor({ sub: 'carol-at-the-issuer' }), {}, server)).status).toBe(200);
  });

  it('are an access token’s only where `oauth.principals` grants one: that subject reads and cancels grynya’s task', async () => {
    const granted = await tokenFor({ sub: GRANTED });
    const read = await call(`/api/tasks/${taskId}`, granted, {}, server);
    expect(read.status).toBe(200);
    const listed = (await (await call('/api/tasks', granted, {}, server)).json()) as { tasks: { task_id: string }[] };
    expect(listed.tasks.map((task) => task.task_id)).toContain(taskId);
    // Another subject is not grynya, and the ops token has its own tasks.
    expect((await call(`/api/tasks/${taskId}`, await tokenFor({ sub: 'alice' }), {}, server)).status).toBe(404);
    expect((await call(`/api/tasks/${taskId}/cancel`, granted, { method: 'POST' }, server)).status).toBe(200);
    await expect.poll(statusOf).toBe('cancelled');
  });
});

describe('OAuth alone', () => {
  it('guards everything as with tokens: the API needs a token, and the dashboard a login only a static token could give', async () => {
    const server = await klymWith({ issuer: issuer.issuer, resource: RESOURCE }, () => {}, {});
    expect((await call('/api/tasks', undefined, {}, server)).status).toBe(401);
    expect((await call('/api/tasks', await tokenFor({ scope: 'klym:read' }), {}, server)).status).toBe(200);
    const dashboard = await fetch(`${server.url}/`, { redirect: 'manual' });
    expect(dashboard.status).toBe(303);
    expect(dashboard.headers.get('location')).toMatch(/^\/dashboard\/login/);
  });
});
