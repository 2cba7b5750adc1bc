import { afterEach, describe, expect, it } from 'vitest';
import { createSessionPool } from '../pool/session-pool.ts';
import { createTaskService, type TaskService } from '../tasks/task-service.ts';
import { runResult } from '../testing/run-result.ts';
import { createA2aEndpoint } from './a2a-endpoint.ts';
import { a2aPush } from './a2a-push.ts';
import { oauthFlowsOf } from './oauth-flows.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

const SCOPES = { start: 'klym:start', read: 'klym:read', cancel: 'klym:cancel' } as const;
const ISSUER = 'https://auth.example.com/tenant';

async function service(options: { push?: boolean } = {}): Promise<TaskService> {
  const pool = await createSessionPool({ upstreams: {} });
  cleanups.push(() => pool.close());
  const created = createTaskService({
    pool,
    shutdownGraceMs: 0,
    run: async () => runResult('done'),
    ...(options.push === true ? { push: a2aPush({ allow: ['https://hooks.example.com'] }) } : {}),
  });
  cleanups.push(() => created.close());
  return created;
}

/** An issuer's metadata document server, as `fetch` sees it: what it answers, and what it was asked. */
function issuer(answer: (url: string) => Response): { fetch: typeof fetch; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    fetch: async (input) => {
      asked.push(String(input));
      return answer(String(input));
    },
  };
}

describe('the Agent Card', () => {
  it('says pushNotifications only when the task service sends them', async () => {
    const off = createA2aEndpoint(await service(), { version: '1.0.0' });
    const on = createA2aEndpoint(await service({ push: true }), { version: '1.0.0' });
    expect(await off.card('http://127.0.0.1:1/')).toMatchObject({ capabilities: { streaming: true, pushNotifications: false } });
    expect(await on.card('http://127.0.0.1:1/')).toMatchObject({ capabilities: { streaming: true, pushNotifications: true } });
  });

  it('writes the OAuth2 scheme’s flows from the issuer’s metadata, with Klym’s scopes described', async () => {
    const server = issuer((url) =>
      url === 'https://auth.example.com/.well-known/oauth-authorization-server/tenant'
        ? Response.json({
            issuer: ISSUER,
            authorization_endpoint: `${ISSUER}/authorize`,
            token_endpoint: `${ISSUER}/token`,
            grant_types_supported: ['authorization_code', 'client_credentials'],
          })
        : new Response('', { status: 404 }),
    );
    const endpoint = createA2aEndpoint(await service(), {
      version: '1.0.0',
      fetch: server.fetch,
      security: { bearer: true, oauth: { issuer: ISSUER, scopes: SCOPES } },
    });
    const card = await endpoint.card('http://127.0.0.1:1/');
    expect(card).toMatchObject({
      securitySchemes: {
        oauth2: {
          oauth2SecurityScheme: {
            oauth2MetadataUrl: 'https://auth.example.com/.well-known/oauth-authorization-server/tenant',
            flows: {
              authorizationCode: {
                authorizationUrl: `${ISSUER}/authorize`,
                tokenUrl: `${ISSUER}/token`,
                pkceRequired: true,
                scopes: {
                  'klym:start': expect.stringContaining('SendMessage'),
                  'klym:read': expect.stringContaining('GetTask'),
                  'klym:cancel': expect.stringContaining('CancelTask'),
                },
              },
            },
          },
        },
      },
    });
    await endpoint.card('http://127.0.0.1:1/');
    expect(server.asked).toHaveLength(1);
  });

  it('names no flows while the issuer cannot be read, and does not ask it again on every card', async () => {
    const server = issuer(() => {
      throw new TypeError('fetch failed');
    });
    const endpoint = createA2aEndpoint(await service(), { version: '1.0.0', fetch: server.fetch, security: { oauth: { issuer: ISSUER, scopes: SCOPES } } });
    for (let card = 0; card < 3; card++) {
      const scheme = ((await endpoint.card('http://127.0.0.1:1/')) as { securitySchemes: { oauth2: { oauth2SecurityScheme: Record<string, unknown> } } })
        .securitySchemes.oauth2.oauth2SecurityScheme;
      expect(scheme).not.toHaveProperty('flows');
      expect(scheme).toHaveProperty('oauth2MetadataUrl');
    }
    expect(server.asked).toHaveLength(1);
  });
});

describe('oauthFlowsOf', () => {
  it('picks the authorization code flow, else client credentials, else the device flow, else none', () => {
    const endpoints = { authorization_endpoint: 'https://a/authorize', token_endpoint: 'https://a/token', device_authorization_endpoint: 'https://a/device' };
    expect(oauthFlowsOf(endpoints, SCOPES)?.flow?.$case).toBe('authorizationCode');
    expect(oauthFlowsOf({ ...endpoints, grant_types_supported: ['client_credentials'] }, SCOPES)).toMatchObject({
      flow: { $case: 'clientCredentials', value: { tokenUrl: 'https://a/token' } },
    });
    expect(oauthFlowsOf({ ...endpoints, grant_types_supported: ['urn:ietf:params:oauth:grant-type:device_code'] }, SCOPES)).toMatchObject({
      flow: { $case: 'deviceCode', value: { deviceAuthorizationUrl: 'https://a/device' } },
    });
    expect(oauthFlowsOf({ grant_types_supported: ['authorization_code'] }, SCOPES)).toBeUndefined();
  });
});
