import { describe, expect, it } from 'vitest';
import { redisTargetOf } from './redis-url.ts';

describe('redisTargetOf', () => {
  it('reads host, port, database, credentials and TLS, and names the server without its password', () => {
    expect(redisTargetOf('redis://:s%40cret@redis.internal:6380/2')).toEqual({
      options: { host: 'redis.internal', port: 6380, db: 2, password: 's@cret' },
      where: 'redis.internal:6380/2',
      secrets: ['s@cret', 's%40cret'],
    });
    expect(redisTargetOf('rediss://klym:pw@[::1]')).toMatchObject({
      options: { host: '::1', port: 6379, db: 0, username: 'klym', password: 'pw', tls: {} },
      where: '[::1]:6379/0',
    });
    expect(redisTargetOf('redis://localhost')).toEqual({ options: { host: 'localhost', port: 6379, db: 0 }, where: 'localhost:6379/0', secrets: [] });
  });

  it('refuses what is not a Redis URL without quoting it', () => {
    expect(() => redisTargetOf('not a url with a p4ssword')).toThrow(/got a string that is not a URL$/);
    expect(() => redisTargetOf('redis://host:6379/db0')).toThrow(/database number, as in redis:\/\/host:6379\/0, got \/db0/);
  });
});
