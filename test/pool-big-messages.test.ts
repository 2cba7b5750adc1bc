import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, isKlymError, type SessionPool, type UpstreamConfig, type UpstreamLogEntry } from '@klym/core';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HTTP_TRANSPORTS, startHttpUpstream } from './support/http-upstream.ts';
import { packageFile } from './support/upstream-servers.ts';

/** A log line of 100 bytes with its number in it, so that a read can be checked end to end. */
function logLine(index: number): string {
  return `2026-11-25T19:00:00.000Z INFO  svc-${String(index % 7)} request ${String(index).padStart(9, '0')} served in 12 ms`.padEnd(99, '.') + '\n';
}

let directory: string;
/** 12 MB of log: its answer from server-filesystem (the text, and again as `structuredContent`) is about 24 MB. */
const BIG_LINES = 120_000;
let bigLog: string;

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'klym-big-'));
  bigLog = Array.from({ length: BIG_LINES }, (_, index) => logLine(index)).join('');
  await writeFile(path.join(directory, 'big.log'), bigLog);
  await writeFile(path.join(directory, 'small.log'), logLine(1) + logLine(2));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

function textOf(result: { content?: unknown }): string {
  return (result.content as { text?: string }[]).map((item) => item.text ?? '').join('');
}

async function filesystemPool(options: Pick<UpstreamConfig, 'maxMessageBytes'> = {}): Promise<SessionPool> {
  return await createSessionPool({
    upstreams: { files: { command: process.execPath, args: [packageFile('@modelcontextprotocol/server-filesystem', 'dist/index.js'), directory], ...options } },
  });
}

describe('a big message from @modelcontextprotocol/server-filesystem over stdio', () => {
  it('a 12 MB file (a 24 MB answer, past the SDK’s own 10 MiB frame limit) is read whole under the default limit', async () => {
    await using pool = await filesystemPool();
    const result = await pool.callTool('files', 'read_text_file', { path: path.join(directory, 'big.log') });
    const text = textOf(result);
    expect(text.length).toBe(bigLog.length);
    expect(text === bigLog).toBe(true);
    expect(pool.status().files).toMatchObject({ state: 'ready', sessions: { opened: 1 } });
  });

  it('an answer over maxMessageBytes fails that call naming its size, the limit and the key; the same session then reads a small file', async () => {
    await using pool = await filesystemPool({ maxMessageBytes: 1_048_576 });
    const failure = await pool.callTool('files', 'read_text_file', { path: path.join(directory, 'big.log') }).catch((error: unknown) => error);
    expect(isKlymError(failure, 'UPSTREAM_MESSAGE_TOO_LARGE')).toBe(true);
    const { message } = failure as Error;
    expect(message).toMatch(
      /^Upstream "files" answered read_text_file with a message of \d+ bytes \(2\d\.\d MiB\), over its limit of 1048576 bytes \(1\.0 MiB\)/,
    );
    expect(message).toContain('upstreams.files.maxMessageBytes');
    expect(failure).toMatchObject({ upstream: 'files', toolName: 'read_text_file' });

    const small = await pool.callTool('files', 'read_text_file', { path: path.join(directory, 'small.log') });
    expect(textOf(small)).toBe(logLine(1) + logLine(2));
    // One session all along: the frame was skipped to its newline, the session was never replaced.
    expect(pool.status().files).toMatchObject({ state: 'ready', sessions: { opened: 1 }, calls: { failed: 1 } });
  });
});

/** A server whose `dump` answers `bytes` of text, after a log notification of `noteBytes` when asked. */
function dumpServer(): McpServer {
  const server = new McpServer({ name: 'dump', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('dump', { inputSchema: { bytes: z.number().int(), noteBytes: z.number().int().optional() } }, async ({ bytes, noteBytes }, extra) => {
    if (noteBytes !== undefined) await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'n'.repeat(noteBytes) } });
    return { content: [{ type: 'text', text: 'd'.repeat(bytes) }] };
  });
  return server;
}

describe('a big message from an HTTP upstream', () => {
  for (const [name, transport, json] of HTTP_TRANSPORTS) {
    it(`over ${name}: an answer over maxMessageBytes fails its call; a call beside it and the next ones answer, on the same session`, async () => {
      const upstream = await startHttpUpstream(dumpServer, { json });
      const logs: UpstreamLogEntry[] = [];
      try {
        await using pool = await createSessionPool({
          upstreams: {
            dump: { url: transport === 'sse' ? upstream.sseUrl : upstream.mcpUrl, transport, maxMessageBytes: 1_048_576, pool: { min: 1, max: 1 } },
          },
          onLog: (entry) => logs.push(entry),
        });
        const [big, beside] = await Promise.allSettled([
          pool.callTool('dump', 'dump', { bytes: 2_000_000 }),
          pool.callTool('dump', 'dump', { bytes: 500_000 }),
        ]);
        expect(big.status).toBe('rejected');
        const failure = (big as PromiseRejectedResult).reason as Error;
        expect(isKlymError(failure, 'UPSTREAM_MESSAGE_TOO_LARGE')).toBe(true);
        expect(failure.message).toMatch(
          /^Upstream "dump" answered dump with a message of (more than )?\d+ bytes \(\d\.\d MiB\), over its limit of 1048576 bytes \(1\.0 MiB\)/,
        );
        expect(failure.message).toContain('upstreams.dump.maxMessageBytes');
        expect(beside).toMatchObject({ status: 'fulfilled', value: { content: [{ text: 'd'.repeat(500_000) }] } });

        const after = await pool.callTool('dump', 'dump', { bytes: 10, noteBytes: 2_000_000 });
        expect(after.content).toEqual([{ type: 'text', text: 'd'.repeat(10) }]);
        // A notification over the limit is dropped, and the log says so.
        const dropped =
          /^Upstream "dump" sent a message of \d+ bytes .* that answered no request, over its limit of 1048576 bytes \(upstreams\.dump\.maxMessageBytes\): it was dropped$/;
        // (The SDK's server sends no notification of a request it answers as JSON.)
        expect(logs.filter((entry) => entry.level === 'warning' && dropped.test(entry.message))).toHaveLength(json ? 0 : 1);
        expect(pool.status().dump).toMatchObject({ state: 'ready', sessions: { opened: 1 }, calls: { failed: 1, succeeded: 2 } });
      } finally {
        await upstream.close();
      }
    });
  }
});
