// The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16) against a real Klym server,
// over Streamable HTTP: the server scenarios that apply to a server without prompts, resources or
// completions (issue #28 names them). Each runs as the suite's own CLI, as a user of the suite would.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKlymServer, type RunningKlymServer } from '../apps/server/src/server/index.ts';
import { packageFile } from './support/upstream-servers.ts';

const run = promisify(execFile);
const SCENARIOS = ['server-initialize', 'ping', 'logging-set-level', 'tools-list', 'tools-call-error', 'server-sse-multiple-streams', 'dns-rebinding-protection'] as const;

let server: RunningKlymServer;
beforeAll(async () => {
  server = await startKlymServer({ port: 0, log: () => {} });
});
afterAll(() => server.close());

describe('the MCP conformance suite, server scenarios', () => {
  for (const scenario of SCENARIOS) {
    it(`passes ${scenario}`, async () => {
      const cli = packageFile('@modelcontextprotocol/conformance', 'dist/index.js');
      // The suite exits non-zero on a failed check; its report is what the test reads either way.
      const { stdout } = await run(process.execPath, [cli, 'server', '--url', server.mcpUrl, '--scenario', scenario], { timeout: 60_000 }).catch(
        (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
      );
      const [, passed, of, failed] = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(stdout) ?? [];
      // The whole report on a failure: the check that failed and why.
      expect({ scenario, passed, failed, report: failed === '0' ? '' : stdout }).toEqual({ scenario, passed: of, failed: '0', report: '' });
      expect(Number(of)).toBeGreaterThan(0);
    });
  }
});
