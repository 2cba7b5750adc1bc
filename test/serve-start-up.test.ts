// `klym serve` with an upstream that accepts TCP connections and never answers: the real CLI listens at
// once and says the upstream is connecting, instead of waiting out the upstream's connect time limit.
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { startKlym, temporaryDirectory } from './cli-harness.ts';

const textOf = (result: Awaited<ReturnType<Client['callTool']>>): string =>
  (result.content as { type: string; text: string }[]).map((item) => item.text).join('');

describe('klym serve with a hung upstream', () => {
  // The test's own limit is well under the upstream's 20 s connect limit: that is the behaviour under test.
  it('listens at once and reports the upstream as connecting on /healthz and in describe_capabilities', { timeout: 12_000 }, async () => {
    const sockets = new Set<Socket>();
    const hung = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    hung.listen(0, '127.0.0.1');
    await once(hung, 'listening');
    using directory = temporaryDirectory();
    writeFileSync(
      path.join(directory.path, 'klym.config.yaml'),
      `upstreams:\n  hung:\n    url: http://127.0.0.1:${(hung.address() as AddressInfo).port}/mcp\n    transport: streamable-http\n    timeouts:\n      connectMs: 20000\n`,
    );
    const klym = startKlym(['serve', '--port', '0'], { cwd: directory.path });
    try {
      const [, url] = (await klym.waitFor(/Klym is serving MCP at (http:\/\/127\.0\.0\.1:\d+)\/mcp/, 'stdout', 8_000)) as [string, string];
      const health = (await (await fetch(`${url}/healthz`)).json()) as unknown;
      expect(health).toMatchObject({ status: 'degraded', upstreams: { hung: { state: 'connecting', sessions: 0 } } });
      // Klym did reach the upstream: its connect is under way, in the background.
      expect(sockets.size).toBeGreaterThan(0);

      const client = new Client({ name: 'serve-start-up-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
      try {
        const described = JSON.parse(textOf(await client.callTool({ name: 'describe_capabilities', arguments: {} }))) as { upstreams: Record<string, unknown> };
        expect(described.upstreams.hung).toEqual({ state: 'connecting', error: 'Upstream "hung" is still connecting; its tools are listed once it answers' });
      } finally {
        await client.close();
      }
    } finally {
      klym.child.kill('SIGTERM');
      await klym.exited();
      for (const socket of sockets) socket.destroy();
      hung.close();
    }
  });
});
