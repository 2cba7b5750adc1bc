// The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16) against a real Klym server,
// over Streamable HTTP: the server scenarios that apply to a server without prompts, resources or
// completions (issue #28 names them); and against @klym/core's pool as a client, through a small client
// command built on it (test/support/conformance-client.ts), the two client-credentials scenarios (SEP-1046)
// included: the suite hands the command its credentials, which become the upstream's `auth`. Each runs as
// the suite's own CLI.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKlymServer, type RunningKlymServer } from '../apps/server/src/server/index.ts';
import { packageFile } from './support/upstream-servers.ts';

const run = promisify(execFile);
const CLI = packageFile('@modelcontextprotocol/conformance', 'dist/index.js');
const CLIENT_SCENARIOS = ['initialize', 'tools_call', 'sse-retry', 'auth/client-credentials-basic', 'auth/client-credentials-jwt'] as const;
const SCENARIOS = [
  'server-initialize',
  'ping',
  'logging-set-level',
  'tools-list',
  'tools-call-error',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
] as const;

let server: RunningKlymServer;
beforeAll(async () => {
  server = await startKlymServer({ port: 0, log: () => {} });
});
afterAll(() => server.close());

describe('the MCP conformance suite, server scenarios', () => {
  for (const scenario of SCENARIOS) {
    it(`passes ${scenario}`, async () => {
      const outcome = await outcomeOf(['server', '--url', server.mcpUrl, '--scenario', scenario]);
      expect(outcome).toEqual({ scenario, checks: outcome.checks, failed: 0, report: '' });
      expect(outcome.checks).toBeGreaterThan(0);
    });
  }
});

describe("the MCP conformance suite, client scenarios, with @klym/core's pool as the client", () => {
  const client = `${process.execPath} --conditions=klym-source ${path.join(import.meta.dirname, 'support', 'conformance-client.ts')}`;
  for (const scenario of CLIENT_SCENARIOS) {
    it(`passes ${scenario}`, async () => {
      const outcome = await outcomeOf(['client', '--command', client, '--scenario', scenario]);
      expect(outcome).toEqual({ scenario, checks: outcome.checks, failed: 0, report: '' });
      expect(outcome.checks).toBeGreaterThan(0);
    });
  }
});

/**
 * A scenario's outcome: its checks, how many failed (NaN without a summary line), and the whole report when
 * not every check passed, so that a failure shows which check failed and why.
 */
async function outcomeOf(args: readonly string[]): Promise<{ scenario: string | undefined; checks: number; failed: number; report: string }> {
  const report = await conformance(args);
  const passedAll = report.failed === '0' && report.passed === report.of;
  return { scenario: args.at(-1), checks: Number(report.of), failed: Number(report.failed), report: passedAll ? '' : report.report };
}

/** Runs the suite's CLI with `args`; its summary line, and its whole output. A failed check exits non-zero: its report is read either way. */
async function conformance(args: readonly string[]): Promise<{ passed?: string; of?: string; failed?: string; report: string }> {
  // Server scenarios report on stdout, client scenarios on stderr.
  const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { timeout: 90_000 }).catch((error: { stdout?: string; stderr?: string }) => ({
    stdout: error.stdout ?? '',
    stderr: error.stderr ?? '',
  }));
  const output = `${stdout}\n${stderr}`;
  const [, passed, of, failed] = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(output) ?? [];
  return { ...(passed === undefined ? {} : { passed }), ...(of === undefined ? {} : { of }), ...(failed === undefined ? {} : { failed }), report: output };
}
