// Runs the A2A conformance kit (github:a2aproject/a2a-tck, branch 1.0-dev), already checked out, against a local
// `klym serve` on the fake OpenAI endpoint of test/support (no real model is called), over JSON-RPC — or, with
// `--reference`, against the reference agent built from @a2a-js/sdk alone (scripts/a2a-reference-agent.ts):
//   node --conditions=klym-source scripts/a2a-tck.ts <kit directory> [python] [--reference] [-- pytest args…]
// A loopback proxy stands in front of the agent: it adds the bearer token the kit does not send; it plays the kit's
// `tck-input-required` scenario for Klym (the kit says it in the messageId, which no model sees: the proxy adds a
// text part saying it, on which the fake model calls klym__ask_caller), each new task's messageId made unique (see
// `rewrite`); and it relays push notifications to the kit's
// receiver, whose port is random (`--webhook-host` points the kit's push URLs at the proxy, which a2a.pushAllow names).
// The kit reads the card from the proxy and posts where it points. Its summary and each failure are printed; the
// exit code is pytest's. See docs/architecture/a2a.md ("A2A conformance") for the figures and what each failure means.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startFakeLlmServer } from '../test/support/fake-llm-server.ts';
import { startReferenceAgent } from './a2a-reference-agent.ts';

const separator = process.argv.indexOf('--');
const own = separator === -1 ? process.argv.slice(2) : process.argv.slice(2, separator);
const reference = own.includes('--reference');
const [kit, python = 'python3'] = own.filter((arg) => arg !== '--reference');
if (kit === undefined) {
  console.error('usage: node --conditions=klym-source scripts/a2a-tck.ts <a2a-tck directory> [python] [--reference] [-- pytest args…]');
  process.exit(2);
}
const pytestArgs = separator === -1 ? [] : process.argv.slice(separator + 1);
const root = path.resolve(import.meta.dirname, '..');
const token = 'a2a-tck-token-0123456789';
const directory = mkdtempSync(path.join(tmpdir(), 'klym-a2a-tck-'));

/** What the proxy adds to a message the kit sends with a `tck-input-required` messageId; the fake model asks on seeing it last. */
const ASK_MARKER = '[tck scenario: input-required]';
/** The marker as Klym's JSON quotes it: its own text part, joined to the message's text by a newline. */
const SENT_MARKER = JSON.stringify(`\n${ASK_MARKER}`).slice(1, -1);
/** Where on the proxy push notifications for the kit's receiver go: `/kit-webhook/:<receiver port>/webhook`. */
const RELAY_PATH = '/kit-webhook/';

// The proxy listens first: Klym's allow-list names it.
let target: URL | undefined;
const proxy = createServer((incoming, outgoing) => {
  const chunks: Buffer[] = [];
  incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
  incoming.on('end', () => {
    let body: Buffer = Buffer.concat(chunks);
    const relay = incoming.url?.startsWith(RELAY_PATH) === true ? /^\/kit-webhook\/:(\d+)(\/.*)$/.exec(incoming.url) : null;
    if (!reference && relay === null) body = rewrite(body);
    const headers = { ...incoming.headers, 'content-length': String(body.length), ...(relay === null ? { authorization: `Bearer ${token}` } : {}) };
    const forwarded = httpRequest(
      relay === null
        ? { host: target?.hostname, port: target?.port, method: incoming.method, path: incoming.url, headers }
        : { host: '127.0.0.1', port: Number(relay[1]), method: incoming.method, path: relay[2], headers },
      (answer) => {
        if (reference || relay !== null) {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(outgoing);
          return;
        }
        // The marker is the proxy's, not the kit's: taken out of what Klym answers (a task's history quotes the
        // kit's messages, which the kit compares with what it sent), in a JSON body or an SSE stream's events.
        const { 'content-length': _length, ...rest } = answer.headers;
        outgoing.writeHead(answer.statusCode ?? 502, rest);
        answer.setEncoding('utf8');
        answer.on('data', (text: string) => outgoing.write(text.replaceAll(SENT_MARKER, '')));
        answer.on('end', () => outgoing.end());
      },
    );
    forwarded.once('error', () => outgoing.destroy());
    forwarded.end(body);
  });
});
proxy.listen(0, '127.0.0.1');
await new Promise((resolve) => proxy.once('listening', resolve));
const proxyPort = (proxy.address() as AddressInfo).port;
const sutHost = `http://127.0.0.1:${proxyPort}`;

let sends = 0;
/**
 * A JSON-RPC send as Klym is to see it: a new task's `messageId` made unique (the kit gives every message of a
 * scenario in one session the same id, `tck-<scenario>-<session>`, though a2a.proto calls it "the unique identifier
 * … of the message", and Klym keeps it as the idempotency key A2A §3.3.1 allows: each `tck-input-required` send
 * would get the first one's task back, long completed); a message the kit tags `tck-input-required` gets a text part
 * saying so. Any other body as it is.
 */
function rewrite(body: Buffer): Buffer {
  let request: { method?: unknown; params?: { message?: { messageId?: unknown; taskId?: unknown; parts?: unknown[] } } };
  try {
    request = JSON.parse(body.toString('utf8')) as typeof request;
  } catch {
    return body;
  }
  const message = request.params?.message;
  if (request.method !== 'SendMessage' && request.method !== 'SendStreamingMessage') return body;
  if (typeof message?.messageId !== 'string' || !Array.isArray(message.parts)) return body;
  if (message.messageId.startsWith('tck-input-required')) message.parts.push({ text: ASK_MARKER });
  if (typeof message.taskId !== 'string' || message.taskId === '') message.messageId = `${message.messageId}~${++sends}`;
  return Buffer.from(JSON.stringify(request));
}

// Each model call is answered at once: with a call of klym__ask_caller when the last thing it reads (the prompt, or
// the answer to its question) carries the marker, else with one line of text, which completes the task.
await using llm = await startFakeLlmServer((request) => {
  const json = request.json as { input?: unknown[]; messages?: unknown[] };
  const last = JSON.stringify((json.input ?? json.messages ?? []).at(-1) ?? null);
  return last.includes(ASK_MARKER)
    ? { kind: 'turn', toolCalls: [{ name: 'klym__ask_caller', args: { question: 'TCK: what next?' } }], usage: { input: 10, output: 3 } }
    : { kind: 'turn', text: 'Hello from TCK', usage: { input: 10, output: 3 } };
});
const config = {
  upstreams: {},
  llm: { model: 'openai:gpt-4.1-mini', providers: { openai: { apiKey: 'sk-test-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } }, maxRetries: 0 },
  tasks: { store: 'memory' },
  server: { tokens: { tck: token } },
  // The kit's receiver, through the proxy, and the URL its config-only tests name (never reached: no delivery there succeeds).
  a2a: { pushAllow: [`${sutHost}${RELAY_PATH}`, 'https://example.com/tck-push-webhook'], pushDelivery: { retryDelayMs: 200, maxRetryDelayMs: 1_000 } },
};
writeFileSync(path.join(directory, 'klym.config.json'), JSON.stringify(config));

const referenceAgent = reference ? await startReferenceAgent() : undefined;
const klym: ChildProcess | undefined = reference
  ? undefined
  : spawn(process.execPath, ['--conditions=klym-source', path.join(root, 'apps/server/src/main.ts'), 'serve', '--port', '0', '--config', 'klym.config.json'], {
      cwd: directory,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
target =
  referenceAgent !== undefined
    ? new URL(referenceAgent.url)
    : await new Promise<URL>((resolve, reject) => {
        let output = '';
        const read = (chunk: Buffer) => {
          output += chunk.toString('utf8');
          const match = /serving MCP at (http:\/\/[^\s]+)\/mcp/.exec(output);
          if (match?.[1] !== undefined) resolve(new URL(match[1]));
        };
        klym?.stdout?.on('data', read);
        klym?.stderr?.on('data', read);
        klym?.once('exit', (code) => reject(new Error(`klym serve exited (${code}) before serving:\n${output}`)));
      });

console.log(`${reference ? 'The reference agent' : 'Klym'} at ${target.origin}, the kit's proxy at ${sutHost}`);

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
    `--webhook-host=127.0.0.1:${proxyPort}${RELAY_PATH}`,
    ...pytestArgs,
  ],
  { cwd: kit, stdio: 'inherit' },
);
const code = await new Promise<number>((resolve) => pytest.once('exit', (exitCode) => resolve(exitCode ?? 1)));

proxy.closeAllConnections();
proxy.close();
await referenceAgent?.close();
if (klym !== undefined) {
  klym.kill('SIGTERM');
  await new Promise((resolve) => klym.once('exit', resolve));
}
rmSync(directory, { recursive: true, force: true });
process.exitCode = code;
