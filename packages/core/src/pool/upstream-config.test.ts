import { describe, expect, it } from 'vitest';
import { resolveUpstreamConfig } from './upstream-config.ts';

describe('resolveUpstreamConfig', () => {
  it('fills in the defaults: auto transport for a URL, one stdio session at most', () => {
    expect(resolveUpstreamConfig('grynya', { url: 'http://grynya-mcp-server:8000/sse' })).toMatchObject({
      transport: 'auto',
      protocol: 'auto',
      min: 1,
      max: 4,
      connectMs: 10_000,
      requestMs: 60_000,
      sessionScope: 'shared',
      maxMessageBytes: 128 * 1024 * 1024,
    });
    expect(resolveUpstreamConfig('memory', { command: 'node', args: ['server.js'] })).toMatchObject({ transport: 'stdio', protocol: '2025-11-25', max: 1 });
  });

  it.each([
    [{}, 'exactly one of `url`, `command` or `connect`'],
    [{ url: 'http://a', command: 'b' }, 'exactly one of'],
    [{ url: 'ftp://host/sse' }, 'expected `url` to be an http(s) URL, got "ftp://host/sse"'],
    [{ url: 'not a url' }, 'got "not a url"'],
    [{ url: 'http://a', transport: 'stdio' as const }, 'needs a `command`'],
    [{ command: 'node', transport: 'sse' as const }, 'needs a `url`'],
    [{ url: 'http://a', transport: 'http' as 'sse' }, 'expected `transport` to be "auto", "streamable-http" or "sse", got "http"'],
    [{ url: 'http://a', pool: { max: 0 } }, 'expected `pool.max` to be an integer ≥ 1, got 0'],
    [{ url: 'http://a', pool: { min: 3, max: 2 } }, '`pool.min` (3) to be at most `pool.max` (2)'],
    [{ url: 'http://a', timeouts: { requestMs: -1 } }, '`timeouts.requestMs` to be an integer ≥ 1, got -1'],
    [{ url: 'http://a', maxMessageBytes: 0 }, 'expected `maxMessageBytes` to be an integer ≥ 1, got 0'],
    [{ url: 'http://a', sessionScope: 'session' as 'task' }, 'expected `sessionScope` to be "shared" or "task", got "session"'],
    [{ url: 'http://a', protocol: '2025-06-18' as 'auto' }, 'expected `protocol` to be "auto", "2025-11-25" or "2026-07-28", got "2025-06-18"'],
    [{ url: 'http://a', transport: 'sse' as const, protocol: '2026-07-28' as const }, 'legacy SSE speaks 2025-11-25 only'],
  ])('refuses %j with a message naming the upstream and the problem', (config, message) => {
    expect(() => resolveUpstreamConfig('grynya', config)).toThrow(`Upstream "grynya": `);
    expect(() => resolveUpstreamConfig('grynya', config)).toThrow(message);
  });
});
