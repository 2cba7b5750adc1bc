// One read of a big file through @modelcontextprotocol/server-filesystem over stdio, in a process of its
// own so that its peak RSS is the read's: `klym <dir> <file> <maxMessageBytes>` through the pool, or `sdk
// <dir> <file> <maxBufferSize>` through the SDK's Client and StdioClientTransport. Prints one JSON line.
import { createRequire } from 'node:module';
import path from 'node:path';
import { createSessionPool } from '@klym/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [mode, directory = '', file = '', limitText = ''] = process.argv.slice(2);
const limit = Number(limitText);
const server = {
  command: process.execPath,
  args: [createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js'), directory],
};
const args = { path: path.join(directory, file) };

type Read = () => Promise<unknown>;
let read: Read;
let close: () => Promise<void>;
if (mode === 'klym') {
  const pool = await createSessionPool({ upstreams: { files: { ...server, maxMessageBytes: limit } } });
  await pool.warmedUp();
  read = () => pool.callTool('files', 'read_text_file', args);
  close = () => pool.close();
} else {
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ ...server, maxBufferSize: limit, stderr: 'ignore' }));
  read = () => client.callTool({ name: 'read_text_file', arguments: args }, undefined, { timeout: 600_000 });
  close = () => client.close();
}

globalThis.gc?.();
const rssBefore = process.memoryUsage().rss;
const start = performance.now();
const outcome = await read().then(
  (result) => `read ${((result as { content: { text: string }[] }).content[0]?.text.length ?? 0) / 1e6} MB`,
  (error: Error) => error.message,
);
const elapsedMs = performance.now() - start;
// The kernel's peak: sampling from a timer would miss what the synchronous decoding holds.
const peakGrowthMiB = (process.resourceUsage().maxRSS * 1024 - rssBefore) / 2 ** 20;
console.log(JSON.stringify({ elapsedMs, peakGrowthMiB, outcome }));
await close();
