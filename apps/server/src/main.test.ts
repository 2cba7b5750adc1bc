import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

describe('pnpm start (the embedded default)', () => {
  it('starts the fake grynya, pools a session over SSE with the Host override, queries it and prints the status', async () => {
    const { stdout } = await run(process.execPath, ['--conditions=klym-source', path.join(import.meta.dirname, 'main.ts')], { timeout: 15_000 });
    expect(stdout).toContain('grynya: 5 tools');
    expect(stdout).toContain('grynya__query_graph  (query_graph)');
    expect(stdout).toMatch(/query_graph\("RETURN 1"\) → \{"status": ?"success", ?"results": ?\[\{"1": ?1\}\]\}/);
    const status = JSON.parse(stdout.slice(stdout.indexOf('pool.status():') + 'pool.status():'.length)) as Record<string, { state: string; transport: string; calls: { succeeded: number } }>;
    expect(status.grynya).toMatchObject({ state: 'ready', transport: 'sse', calls: { succeeded: 1 } });
  });
});
