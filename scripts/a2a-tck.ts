// Runs the A2A conformance kit (github:a2aproject/a2a-tck, branch 1.0-dev), already checked out, against a local
// `klym serve` on the fake OpenAI endpoint of test/support (no real model is called), over JSON-RPC:
//   node --conditions=klym-source scripts/a2a-tck.ts <kit directory> [python] [-- pytest args…]
// The kit sends no bearer token, so a loopback proxy in front of Klym adds one; the kit reads the card from the
// proxy and posts where it points. Its summary and each failure are printed; the exit code is pytest's.
// See docs/architecture/a2a.md ("A2A conformance") for the figures and what each remaining failure means.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';

const [kit, python = 'python3', ...rest] = process.argv.slice(2);
if (kit === undefined) {
  console.error('usage: node --conditions=klym-source scripts/a2a-tck.ts <a2a-tck directory> [python] [-- pytest args…]');
  process.exit(2);
}
const pytestArgs = rest[0] === '--' ? rest.slice(1) : rest;
const root = path.resolve(import.meta.dirname, '..');
const token = 'a2a-tck-token-0123456789';
const directory = mkdtempSync(path.join(tmpdir(), 'klym-a2a-tck-'));

// Every model call is answered at once with one line of text: each task the kit starts completes.
await using llm = await startFakeLlmServer(() => ({ kind: 'turn', text: 'Hello from TCK', usage: { input: 10, output: 3 } }));
const config = {
  upstreams: {},
  llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
  tasks: { store: 'memory' },
  server: { tokens: { tck: token } },
};
writeFileSync(path.join(directory, 'klym.config.json'), JSON.stringify(config));

const klym = spawn(
  process.execPath,
  ['--conditions=klym-source', path.join(root, 'apps/server/src/main.ts'), 'serve', '--port', '0', '--config', 'klym.config.json'],
  {
    cwd: directory,
    stdio: ['ignore', 'pipe', 'pipe'],
  },
);
const klymUrl = await new Promise<URL>((resolve, reject) => {
  let output = '';
  const read = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    const match = /serving MCP at (http:\/\/[^\s]+)\/mcp/.exec(output);
    if (match?.[1] !== undefined) resolve(new URL(match[1]));
  };
  klym.stdout.on('data', read);
  klym.stderr.on('data', read);
  klym.once('exit', (code) => reject(new Error(`klym serve exited (${code}) before serving:\n${output}`)));
});

// The proxy: every request forwarded as it is, with the bearer token added.
const proxy = createServer((incoming, outgoing) => {
  const forwarded = httpRequest(
    {
      host: klymUrl.hostname,
      port: klymUrl.port,
      method: incoming.method,
      path: incoming.url,
      headers: { ...incoming.headers, authorization: `Bearer ${token}` },
    },
    (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(outgoing);
    },
  );
  forwarded.once('error', () => outgoing.destroy());
  incoming.pipe(forwarded);
});
proxy.listen(0, '127.0.0.1');
await new Promise((resolve) => proxy.once('listening', resolve));
const sutHost = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
console.log(`Klym at ${klymUrl.origin}, the kit's proxy at ${sutHost}`);

// run_tck.py also asks for pytest-html's report; pytest is called as it calls it, without that one.
const pytest = spawn(
  python,
  [
    '-m',
    'pytest',
    'tests/compatibility/',
    `--sut-host=${sutHost}`,
    '--transport=jsonrpc',
    '--tb=line',
    '-q',
    '-rfExs',
    '--compatibility-report=reports/compatibility',
    ...pytestArgs,
  ],
  { cwd: kit, stdio: 'inherit' },
);
const code = await new Promise<number>((resolve) => pytest.once('exit', (exitCode) => resolve(exitCode ?? 1)));

proxy.close();
klym.kill('SIGTERM');
await new Promise((resolve) => klym.once('exit', resolve));
rmSync(directory, { recursive: true, force: true });
process.exitCode = code;
