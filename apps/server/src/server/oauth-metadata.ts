import type { Env, Hono } from 'hono';
import type { ResolvedOAuthOptions } from './oauth-options.ts';

/** What a `Bearer` challenge says beyond where the resource's metadata is (RFC 6750 §3). */
export interface BearerChallenge {
  /** `invalid_token` (401) or `insufficient_scope` (403); absent when no token was presented. */
  readonly error?: 'invalid_token' | 'insufficient_scope';
  /** Why, for a person. */
  readonly description?: string;
  /** The scopes the request needs (space-separated), with `insufficient_scope`. */
  readonly scope?: string;
}

/** RFC 6750's quoted values allow printable ASCII but `"` and `\`. */
const quoted = (value: string): string => `"${value.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '?')}"`;

/**
 * The `WWW-Authenticate` value of a 401 or 403 as the MCP authorization spec asks: `resource_metadata` tells
 * a client where to learn which authorization server to get a token from (RFC 9728 §5.1), and an
 * `insufficient_scope` answer names the scope to ask for (step-up).
 */
export function bearerChallenge(options: ResolvedOAuthOptions, challenge: BearerChallenge = {}): string {
  const parameters = [`realm="klym"`, `resource_metadata=${quoted(options.resourceMetadataUrl)}`];
  if (challenge.error !== undefined) parameters.push(`error="${challenge.error}"`);
  if (challenge.description !== undefined) parameters.push(`error_description=${quoted(challenge.description)}`);
  if (challenge.scope !== undefined) parameters.push(`scope=${quoted(challenge.scope)}`);
  return `Bearer ${parameters.join(', ')}`;
}

/**
 * Serves the protected resource metadata (RFC 9728) without auth, at `/.well-known/oauth-protected-resource`
 * and under it with the resource's path (`…/mcp`: the URL a 401's `resource_metadata` names, and the one MCP
 * clients try first). One document for both, since Klym is one resource.
 */
export function mountResourceMetadata<E extends Env>(app: Hono<E>, options: ResolvedOAuthOptions): void {
  const document = {
    resource: options.resource,
    authorization_servers: [options.issuer],
    scopes_supported: [...new Set(Object.values(options.scopes))],
    bearer_methods_supported: ['header'],
  };
  app.get('/.well-known/oauth-protected-resource', (c) => c.json(document));
  app.get('/.well-known/oauth-protected-resource/*', (c) => c.json(document));
}
