import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSessionPool, isKlymError, type SessionPool, type UpstreamConfig } from '@klym/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
    expect(message).toMatch(/^Upstream "files" answered read_text_file with a message of \d+ bytes \(2\d\.\d MiB\), over its limit of 1048576 bytes \(1\.0 MiB\)/);
    expect(message).toContain('upstreams.files.maxMessageBytes');
    expect(failure).toMatchObject({ upstream: 'files', toolName: 'read_text_file' });

    const small = await pool.callTool('files', 'read_text_file', { path: path.join(directory, 'small.log') });
    expect(textOf(small)).toBe(logLine(1) + logLine(2));
    // One session all along: the frame was skipped to its newline, the session was never replaced.
    expect(pool.status().files).toMatchObject({ state: 'ready', sessions: { opened: 1 }, calls: { failed: 1 } });
  });
});
