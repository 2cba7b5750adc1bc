import { generateKeyPairSync } from 'node:crypto';
import { inspect } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import { createInMemoryUpstream } from '../testing/in-memory-upstream.ts';
import { createSessionPool } from './session-pool.ts';
import { upstreamSecrets } from './upstream-secrets.ts';

const issuer = 'https://auth.example.com';
const server = () => new McpServer({ name: 'plain', version: '1.0.0' });

describe('upstreamSecrets', () => {
  it('lists the client secret, secret-named header values without their scheme word, and secret-named env values; not Host or other names', () => {
    const secrets = upstreamSecrets({
      auth: { type: 'client_credentials', clientId: 'klym', clientSecret: 'client-secret-0123', issuer },
      headers: {
        Authorization: 'Bearer bearer-token-4567',
        'X-Api-Key': 'api-key-8901',
        Cookie: 'session=cookie-2345',
        Host: 'graph.internal',
        Accept: 'text/plain',
      },
      env: { GITHUB_TOKEN: 'ghp_env-token-6789', DB_PASSWORD: 'env-password-0123', LOG_LEVEL: 'debug' },
    });

    expect(secrets).toEqual(['client-secret-0123', 'bearer-token-4567', 'api-key-8901', 'session=cookie-2345', 'ghp_env-token-6789', 'env-password-0123']);
    expect(secrets).not.toContain('graph.internal');
    expect(secrets).not.toContain('debug');
  });

  it('strips a Basic scheme word too, in any case, and lists a private key whole and line by line', () => {
    const privateKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const secrets = upstreamSecrets({
      auth: { type: 'private_key_jwt', clientId: 'klym', privateKey, issuer },
      headers: { 'proxy-authorization': 'basic dXNlcjpwYXNz' },
    });

    expect(secrets[0]).toBe(privateKey.trim());
    for (const line of privateKey
      .trim()
      .split('\n')
      .filter((keyLine) => !keyLine.startsWith('-----')))
      expect(secrets).toContain(line);
    expect(secrets.at(-1)).toBe('dXNlcjpwYXNz');
  });

  it('lists nothing for an upstream without auth, headers or env', () => {
    expect(upstreamSecrets({})).toEqual([]);
  });
});

describe("a session pool's secrets", () => {
  it("are its upstreams' secrets, each once, and the pool printed shows none of them", async () => {
    await using pool = await createSessionPool({
      upstreams: {
        one: { ...createInMemoryUpstream(server), headers: { Authorization: 'Bearer shared-token-0123', Host: 'one.internal' } },
        two: { ...createInMemoryUpstream(server), headers: { authorization: 'Bearer shared-token-0123' }, env: { API_KEY: 'two-key-4567' } },
      },
    });

    expect(pool.secrets).toEqual(['shared-token-0123', 'two-key-4567']);
    expect(inspect(pool, { depth: 10 })).not.toContain('two-key-4567');
    expect(JSON.stringify(pool)).not.toContain('two-key-4567');
  });
});
