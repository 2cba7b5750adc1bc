import { describe, expect, it } from 'vitest';
import { createKlymApp } from './app.ts';
import { operationsOf } from './oauth-scopes.ts';

const call = (method: string) => operationsOf('POST', '/a2a', { jsonrpc: '2.0', id: 1, method, params: {} });

describe('A2A routes', () => {
  it('needs klym:start to send, klym:cancel to cancel, klym:read for the rest', () => {
    expect(call('SendMessage')).toEqual(['start']);
    expect(call('SendStreamingMessage')).toEqual(['start']);
    expect(call('CancelTask')).toEqual(['cancel']);
    expect(call('GetTask')).toEqual(['read']);
    expect(call('ListTasks')).toEqual(['read']);
    expect(call('SubscribeToTask')).toEqual(['read']);
    expect(operationsOf('POST', '/a2a', undefined)).toEqual(['read']);
  });

  it('serves a public card naming bearer and OAuth2 with its scopes when auth.oauth is set', async () => {
    await using klym = await createKlymApp({
      auth: { tokens: { grynya: 'a2a-card-token-0123456789' }, oauth: { issuer: 'https://auth.example.com/tenant', resource: 'https://klym.example.com/mcp' } },
      a2a: { url: 'https://klym.example.com/a2a' },
      tasks: { shutdownGraceMs: 0 },
      log: () => {},
    });
    const response = await klym.app.request('/.well-known/agent-card.json');
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      supportedInterfaces: [{ url: 'https://klym.example.com/a2a', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      securitySchemes: {
        bearer: { httpAuthSecurityScheme: { scheme: 'bearer' } },
        oauth2: { oauth2SecurityScheme: { oauth2MetadataUrl: 'https://auth.example.com/.well-known/oauth-authorization-server/tenant' } },
      },
      securityRequirements: [{ schemes: { bearer: {} } }, { schemes: { oauth2: { list: ['klym:start', 'klym:read', 'klym:cancel'] } } }],
    });
    expect((await klym.app.request('/a2a', { method: 'POST', body: '{}' })).status).toBe(401);
  });
});
