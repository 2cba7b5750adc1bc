import { describe, expect, it } from 'vitest';
import { IssuerUnavailableError, discoverJwksUri, metadataUrlsOf } from './oauth-discovery.ts';

/** A fetch that answers each URL from `answers` (404 for the rest) and records what was asked. */
function answering(answers: Record<string, { status?: number; body: unknown }>): { fetch: typeof fetch; asked: string[] } {
  const asked: string[] = [];
  const stub = async (input: string | URL | Request): Promise<Response> => {
    const url = String(input);
    asked.push(url);
    const answer = answers[url];
    return answer === undefined ? new Response('{}', { status: 404 }) : new Response(JSON.stringify(answer.body), { status: answer.status ?? 200 });
  };
  return { fetch: stub as typeof fetch, asked };
}

describe('discoverJwksUri', () => {
  it('tries RFC 8414’s path (inserted before an issuer’s path), then OpenID Connect’s (appended)', async () => {
    expect(metadataUrlsOf('https://auth.example.com')).toEqual([
      'https://auth.example.com/.well-known/oauth-authorization-server',
      'https://auth.example.com/.well-known/openid-configuration',
    ]);
    expect(metadataUrlsOf('https://auth.example.com/realms/klym/')).toEqual([
      'https://auth.example.com/.well-known/oauth-authorization-server/realms/klym',
      'https://auth.example.com/realms/klym/.well-known/openid-configuration',
    ]);
    const issuer = 'https://auth.example.com/realms/klym';
    const { fetch, asked } = answering({ [`${issuer}/.well-known/openid-configuration`]: { body: { issuer, jwks_uri: `${issuer}/certs` } } });
    await expect(discoverJwksUri(issuer, { fetch })).resolves.toBe(`${issuer}/certs`);
    expect(asked).toHaveLength(2);
  });

  it('refuses metadata of another issuer, or without an https jwks_uri, and says where it looked when nothing is there', async () => {
    const issuer = 'https://auth.example.com';
    const metadata = `${issuer}/.well-known/oauth-authorization-server`;
    const impostor = answering({ [metadata]: { body: { issuer: 'https://evil.example', jwks_uri: 'https://evil.example/keys' } } });
    await expect(discoverJwksUri(issuer, impostor)).rejects.toThrow(`The metadata at ${metadata} names the issuer "https://evil.example", not ${issuer}`);
    const plain = answering({ [metadata]: { body: { issuer, jwks_uri: 'http://auth.example.com/keys' } } });
    await expect(discoverJwksUri(issuer, plain)).rejects.toThrow('has no usable `jwks_uri` (an https URL), got "http://auth.example.com/keys"');
    const broken = answering({ [metadata]: { status: 500, body: {} } });
    await expect(discoverJwksUri(issuer, broken)).rejects.toThrow(`The issuer ${issuer}'s metadata (${metadata}) answered 500`);
    const nothing = discoverJwksUri(issuer, answering({}));
    await expect(nothing).rejects.toBeInstanceOf(IssuerUnavailableError);
    await expect(nothing).rejects.toThrow(/found no metadata .* answered 404; .* answered 404; set `auth.oauth.jwksUri`/);
  });
});
