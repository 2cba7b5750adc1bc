import { upstreamAuthSecrets } from './upstream-auth.ts';
import type { UpstreamConfig } from './upstream-config.ts';

/** Header and environment names whose values are taken for secrets. */
const SECRET_NAME = /authorization|token|key|secret|passw|cookie/i;

/**
 * The secrets an upstream's configuration holds, for redaction: its `auth` secrets (the client secret, or
 * the private key whole and line by line, as {@link upstreamAuthSecrets} lists them), and the values of its
 * `headers` and `env` whose names look secret (`authorization`, `token`, `key`, `secret`, `passw`,
 * `cookie`, in any case), a leading `Bearer ` or `Basic ` removed so that the credential alone is found
 * wherever an upstream echoes it. A header such as `Host` is not listed. A session pool's `secrets` are
 * these, over all its upstreams.
 * @example
 * ```ts
 * upstreamSecrets({ url, headers: { Authorization: 'Bearer abc123def', Host: 'localhost' } }) // ['abc123def']
 * ```
 */
export function upstreamSecrets(upstream: Pick<UpstreamConfig, 'auth' | 'headers' | 'env'>): string[] {
  const named = [...Object.entries(upstream.headers ?? {}), ...Object.entries(upstream.env ?? {})];
  return [
    ...upstreamAuthSecrets(upstream.auth),
    ...named.flatMap(([name, value]) => (SECRET_NAME.test(name) ? [value.replace(/^(Bearer|Basic)\s+/i, '')] : [])),
  ];
}
