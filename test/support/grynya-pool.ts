import { createSessionPool, type SessionPool } from '@klym/core';
import { createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';

/**
 * The fake grynya and a pool over it through legacy SSE, as Klym meets grynya-mcp-server inside Docker:
 * only `Host: localhost` is allowed, and the pool sends it. Both are closed by the test's `cleanups`.
 */
export async function grynyaPool(cleanups: (() => Promise<unknown>)[]): Promise<{ grynya: FakeGrynya; pool: SessionPool }> {
  const grynya = await createFakeGrynya({ allowedHosts: ['localhost'] });
  cleanups.push(() => grynya.close());
  const pool = await createSessionPool({ upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', headers: { Host: 'localhost' } } } });
  cleanups.push(() => pool.close());
  return { grynya, pool };
}
