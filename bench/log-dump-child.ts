// `runner_threads_speedup`'s upstream (bench/runner-threads.ts), over stdio: `log_dump { kib }` answers a
// service log of that many KiB, varied lines of timestamps, levels, ids and words, so that a run's tokenizer
// has real work (numbers and words, not one repeated token). Each answer is made once per size, then cached.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const LEVELS = ['INFO', 'WARN', 'ERROR', 'DEBUG'] as const;
const WORDS = ['request', 'served', 'upstream', 'timeout', 'session', 'opened', 'closed', 'retry', 'cache', 'miss', 'graph', 'query'] as const;

function logOf(kib: number): string {
  const lines: string[] = [];
  let bytes = 0;
  for (let line = 0; bytes < kib * 1024; line++) {
    const words = Array.from({ length: 6 }, (_, index) => WORDS[(line * 7 + index * 3) % WORDS.length]).join(' ');
    const text = `2026-11-28T10:${String(line % 60).padStart(2, '0')}:${String((line * 13) % 60).padStart(2, '0')}.${(line * 37) % 1000} ${LEVELS[line % 4]} svc-${line % 17} id=${(line * 2_654_435_761) % 1_000_003} ${words} in ${(line * 31) % 997} ms`;
    lines.push(text);
    bytes += text.length + 1;
  }
  return lines.join('\n');
}

const cache = new Map<number, string>();
const server = new McpServer({ name: 'log-dump', version: '1.0.0' });
server.registerTool('log_dump', { inputSchema: { kib: z.number().int().positive() }, annotations: { readOnlyHint: true } }, ({ kib }) => {
  let text = cache.get(kib);
  if (text === undefined) cache.set(kib, (text = logOf(kib)));
  return { content: [{ type: 'text', text }] };
});
await server.connect(new StdioServerTransport());
