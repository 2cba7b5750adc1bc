#!/usr/bin/env node
// A small stdio MCP server for failure tests: tools that crash the process, flood stderr, hang until
// cancelled, or answer with the process id (so a test can tell whether it talks to a new process).
// Modes, as arguments: `--spawn-log=<file>` appends a line to the file at each start;
// `--exit-after-initialize=<ms>` exits that long after answering `initialize`;
// `--flood-stderr=<MiB>` writes that much to stderr once initialized (half in 1 KiB lines, half as one
// line without a newline), then `flood done`.
import { appendFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const { values: modes } = parseArgs({
  options: { 'spawn-log': { type: 'string' }, 'exit-after-initialize': { type: 'string' }, 'flood-stderr': { type: 'string' } },
});
if (modes['spawn-log'] !== undefined) appendFileSync(modes['spawn-log'], `${process.pid}\n`);

const server = new McpServer({ name: 'stdio-fixture', version: '1.0.0' }, { capabilities: { logging: {} } });

/** Writes `megabytes` MiB to stderr, in 1 KiB lines or as one line without a newline, waiting for the pipe to drain. */
async function floodStderr(megabytes: number, newlines: boolean): Promise<void> {
  const chunk = (newlines ? `${'e'.repeat(1023)}\n` : 'e'.repeat(1024)).repeat(1024);
  for (let written = 0; written < megabytes; written++) {
    if (!process.stderr.write(chunk)) await new Promise((resolve) => process.stderr.once('drain', resolve));
  }
}

server.registerTool('pid', { annotations: { readOnlyHint: true } }, () => ({ content: [{ type: 'text', text: String(process.pid) }] }));

server.registerTool('crash', {}, () => {
  process.exit(3);
});

server.registerTool('flood_stderr', { inputSchema: { megabytes: z.number(), newlines: z.boolean() } }, async ({ megabytes, newlines }) => {
  await floodStderr(megabytes, newlines);
  process.stderr.write('\nflood done\n');
  return { content: [{ type: 'text', text: `wrote ${megabytes} MiB` }] };
});

server.registerTool('log', { inputSchema: { message: z.string() } }, async ({ message }) => {
  // Written (flushed to the pipe) before the answer goes out, so it belongs to this call.
  await new Promise((resolve) => process.stderr.write(`stderr says ${message}\n`, resolve));
  await server.sendLoggingMessage({ level: 'warning', logger: 'fixture', data: message });
  return { content: [{ type: 'text', text: 'logged' }] };
});

server.registerTool('hang', {}, (extra) => {
  // Answers only when cancelled, and says on stderr when it started, and which request was cancelled and why.
  process.stderr.write(`hang ${extra.requestId} started\n`);
  return new Promise((resolve) => {
    const cancelled = (): void => {
      process.stderr.write(`hang ${extra.requestId} cancelled: ${String(extra.signal.reason)}\n`);
      resolve({ content: [{ type: 'text', text: 'cancelled' }] });
    };
    if (extra.signal.aborted) cancelled();
    else extra.signal.addEventListener('abort', cancelled, { once: true });
  });
});

server.server.oninitialized = () => {
  const exitAfter = modes['exit-after-initialize'];
  if (exitAfter !== undefined) setTimeout(() => process.exit(0), Number(exitAfter));
  const flood = modes['flood-stderr'];
  if (flood !== undefined) {
    const half = Number(flood) / 2;
    void floodStderr(half, true)
      .then(() => floodStderr(half, false))
      .then(() => process.stderr.write('\nflood done\n'));
  }
};

await server.connect(new StdioServerTransport());
process.stderr.write(`stdio fixture ready, pid ${process.pid}\n`);
