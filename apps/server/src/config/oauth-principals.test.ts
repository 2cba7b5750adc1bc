// `server.oauth.principals`: the grants of a static token's principal to a subject of the issuer, from a config file.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isKlymError } from '@klym/core';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveServerOptions } from '../server/server-options.ts';
import { serverOptions } from './core-options.ts';
import { resolveConfig } from './resolve-config.ts';

const directories: string[] = [];
afterAll(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

/** Resolves a config file of static tokens `ops` and `grynya` and `server.oauth` with `principals`. */
function configWith(principals: string) {
  const directory = mkdtempSync(path.join(tmpdir(), 'klym-oauth-principals-'));
  directories.push(directory);
  const tokens = '  tokens: { ops: 0123456789abcdef, grynya: fedcba9876543210 }\n';
  writeFileSync(path.join(directory, 'klym.config.yaml'), `server:\n${tokens}  oauth:\n    issuer: https://auth.example.com\n    principals: ${principals}\n`);
  return () => resolveConfig({ cwd: directory });
}

describe('server.oauth.principals', () => {
  it('grants a static token’s principal to a claim value, handed to the server as it is', () => {
    const { config } = configWith('{ "f3c1-uuid-of-grynya": grynya }')();
    expect(config.server.oauth?.principals).toEqual({ 'f3c1-uuid-of-grynya': 'grynya' });
    expect(resolveServerOptions(serverOptions(config, '/srv')).auth?.oauth?.principals).toEqual({ 'f3c1-uuid-of-grynya': 'grynya' });
  });

  it('refuses a grant of a principal no static token has (a typo would make a new, empty one), naming the key', () => {
    let message = '';
    try {
      configWith('{ "f3c1-uuid-of-grynya": grynia }')();
    } catch (error) {
      if (isKlymError(error, 'CONFIG_INVALID')) message = error.message;
    }
    expect(message).toContain('server.oauth.principals.f3c1-uuid-of-grynya = "grynia": expected a principal of `server.tokens` (ops, grynya)');
  });
});
