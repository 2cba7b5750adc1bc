#!/usr/bin/env node
// A stdio MCP server with one tool, `read_log`, that answers a generated log the way
// @modelcontextprotocol/server-filesystem answers a file: its text as a text item and again as
// `structuredContent`. The log is the same for the same arguments: `lines` lines of requests, every
// 1000th an ERROR, and on line `needle_at` (0-based) the one FATAL line a task must find.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

/** The log `read_log` answers: `lines` lines, the needle on line `needleAt`. */
export function bigLog(lines: number, needleAt: number): string {
  const out: string[] = [];
  for (let n = 0; n < lines; n++) {
    const time = `2026-11-25T03:${String(Math.floor(n / 60_000) % 60).padStart(2, '0')}:${String(Math.floor(n / 1000) % 60).padStart(2, '0')}.${String(n % 1000).padStart(3, '0')}Z`;
    if (n === needleAt) out.push(`${time} svc-7 FATAL the needle: disk /dev/sdq failed after ${n} requests`);
    else if (n % 1000 === 999) out.push(`${time} svc-${n % 13} ERROR request failed code=5${n % 10}2 id=${n.toString(16)} user=${(n * 7919) % 100_000}`);
    else out.push(`${time} svc-${n % 13} INFO request ok code=200 id=${n.toString(16)} user=${(n * 7919) % 100_000} bytes=${(n * 31) % 65_536}`);
  }
  return `${out.join('\n')}\n`;
}

if (process.argv[1] === import.meta.filename) {
  const server = new McpServer({ name: 'big-log', version: '1.0.0' });
  server.registerTool(
    'read_log',
    {
      description: "Reads the night's log.",
      inputSchema: { lines: z.number().int().positive(), needle_at: z.number().int().min(0) },
      annotations: { readOnlyHint: true },
    },
    ({ lines, needle_at: needleAt }) => {
      const text = bigLog(lines, needleAt);
      return { content: [{ type: 'text', text }], structuredContent: { content: text } };
    },
  );
  await server.connect(new StdioServerTransport());
}
