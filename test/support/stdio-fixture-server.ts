#!/usr/bin/env node
// A small stdio MCP server for failure tests: tools that crash the process, flood stderr, hang, or
// answer with the process id (so a test can tell whether it talks to a new process).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'stdio-fixture', version: '1.0.0' }, { capabilities: { logging: {} } });

server.registerTool('pid', { annotations: { readOnlyHint: true } }, () => ({ content: [{ type: 'text', text: String(process.pid) }] }));

server.registerTool('crash', {}, () => {
  process.exit(3);
});

server.registerTool('flood_stderr', { inputSchema: { megabytes: z.number(), newlines: z.boolean() } }, async ({ megabytes, newlines }) => {
  const chunk = (newlines ? `${'e'.repeat(1023)}\n` : 'e'.repeat(1024)).repeat(1024);
  for (let written = 0; written < megabytes; written++) {
    if (!process.stderr.write(chunk)) await new Promise((resolve) => process.stderr.once('drain', resolve));
  }
  process.stderr.write('\nflood done\n');
  return { content: [{ type: 'text', text: `wrote ${megabytes} MiB` }] };
});

server.registerTool('log', { inputSchema: { message: z.string() } }, async ({ message }) => {
  // Written (flushed to the pipe) before the answer goes out, so it belongs to this call.
  await new Promise((resolve) => process.stderr.write(`stderr says ${message}\n`, resolve));
  await server.sendLoggingMessage({ level: 'warning', logger: 'fixture', data: message });
  return { content: [{ type: 'text', text: 'logged' }] };
});

await server.connect(new StdioServerTransport());
process.stderr.write(`stdio fixture ready, pid ${process.pid}\n`);
