import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, type UpstreamLogEntry } from '@klym/core';
import { afterEach, describe, expect, it } from 'vitest';
import { packageFile, startServerEverything, type RunningServer } from './support/upstream-servers.ts';

const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

function textOf(result: { content?: unknown }): string {
  const content = result.content as { type: string; text?: string }[];
  return content.map((item) => item.text ?? '').join('');
}

describe('pool against @modelcontextprotocol/server-everything', () => {
  for (const [transport, kind] of [
    ['sse', 'sse'],
    ['streamableHttp', 'streamable-http'],
  ] as const) {
    it(`echo round trip over ${kind}, with the transport found by the auto probe`, async () => {
      const server = await startServerEverything(transport);
      servers.push(server);
      await using pool = await createSessionPool({ upstreams: { everything: { url: server.url } } });
      await pool.warmedUp();

      const listing = await pool.listTools();
      expect(listing.upstreams.everything).toMatchObject({ ok: true });
      expect(listing.tools.map((tool) => tool.name)).toContain('everything__echo');

      const result = await pool.callTool('everything', 'echo', { message: 'привіт' });
      expect(textOf(result)).toContain('привіт');
      expect(pool.status().everything).toMatchObject({ state: 'ready', transport: kind, sessions: { opened: 1 } });
    });
  }
});

describe('pool against @modelcontextprotocol/server-memory over stdio', () => {
  it('create_entities, then read_graph shows them; the child is reaped on close', async () => {
    const directory = await mkdtemp(path.join(tmpdir(), 'klym-memory-'));
    const logs: UpstreamLogEntry[] = [];
    try {
      const pool = await createSessionPool({
        upstreams: {
          memory: {
            command: process.execPath,
            args: [packageFile('@modelcontextprotocol/server-memory', 'dist/index.js')],
            env: { MEMORY_FILE_PATH: path.join(directory, 'memory.jsonl') },
          },
        },
        onLog: (entry) => logs.push(entry),
      });
      await pool.callTool('memory', 'create_entities', {
        entities: [{ name: 'Grynya', entityType: 'agent', observations: ['orchestrates'] }],
      });
      const graph = await pool.callTool('memory', 'read_graph', {});
      expect(textOf(graph)).toContain('Grynya');
      expect(pool.status().memory).toMatchObject({ transport: 'stdio', sessions: { live: 1 } });
      await pool.close();
      expect(pool.status().memory).toMatchObject({ state: 'closed', sessions: { live: 0 } });
      // The server announces itself on stderr; it reached the pool's log, tagged with the upstream.
      expect(logs.some((entry) => entry.upstream === 'memory' && entry.source === 'stderr')).toBe(true);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});
