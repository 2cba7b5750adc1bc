import { describe, expect, it } from 'vitest';
import { resolveOAuthOptions } from './oauth-options.ts';

const ISSUER = 'https://auth.example.com';
const resolve = (principals: Record<string, unknown>) => () =>
  resolveOAuthOptions({ issuer: ISSUER, resource: 'https://klym.example/mcp', principals: principals as Record<string, string> }, '127.0.0.1', 8765);

describe('resolveOAuthOptions: `principals`, the grants of a static principal to a subject', () => {
  it('is empty by default, and kept as given', () => {
    expect(resolveOAuthOptions({ issuer: ISSUER }, '127.0.0.1', 8765).principals).toEqual({});
    expect(resolve({ 'f3c1-uuid-of-grynya': 'grynya' })().principals).toEqual({ 'f3c1-uuid-of-grynya': 'grynya' });
  });

  it('refuses a grant of no usable principal, or by an empty claim value, naming the key', () => {
    expect(resolve({ someone: '' })).toThrow('Expected `auth.oauth.principals.someone` to be a principal (1 to 256 characters), got ""');
    expect(resolve({ someone: 42 })).toThrow('Expected `auth.oauth.principals.someone` to be a principal (1 to 256 characters), got 42');
    expect(resolve({ '': 'grynya' })).toThrow('Expected `auth.oauth.principals` to be keyed by claim values of 1 to 256 characters, got ""');
  });
});
