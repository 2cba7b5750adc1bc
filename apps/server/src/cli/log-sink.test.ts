import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../config/resolve-config.ts';
import type { CliIo } from './cli.ts';
import { logSink } from './log-sink.ts';

const cwd = mkdtempSync(path.join(tmpdir(), 'klym-log-sink-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

const TOKEN = 'log-sink-token-0123456789abcdef';

/** A sink over the configuration `env` makes, writing to a buffer that is, or is not, a terminal. */
function sinkOver(env: Record<string, string>, isTTY: boolean): { log: ReturnType<typeof logSink>['log']; written: string[]; close: () => Promise<void> } {
  const written: string[] = [];
  const stderr = { write: (text: string) => written.push(text), isTTY };
  const io: CliIo = { stdout: { write: () => true }, stderr, env: {}, cwd };
  const { config } = resolveConfig({ cwd, env: { KLYM_SERVER_TOKENS: JSON.stringify({ ops: TOKEN }), ...env } });
  return { ...logSink(config, io), written };
}

describe('the server log (logging.*)', () => {
  it('writes one JSON object a line when stderr is not a terminal, with the fields, secrets scrubbed from the message and fields alike', () => {
    const { log, written } = sinkOver({}, false);
    log(`klym: serving with ${TOKEN}`, 'warning', {
      method: 'GET',
      route: '/api/tasks/:id',
      status: 200,
      durationMs: 1.5,
      principal: 'ops',
      note: `Bearer ${TOKEN}`,
    });

    expect(written).toHaveLength(1);
    expect(written[0]?.endsWith('\n')).toBe(true);
    expect(JSON.parse(written[0] as string)).toEqual({
      level: 'warning',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      msg: 'klym: serving with [redacted]',
      method: 'GET',
      route: '/api/tasks/:id',
      status: 200,
      durationMs: 1.5,
      principal: 'ops',
      note: 'Bearer [redacted]',
    });
  });

  it('writes readable lines on a terminal (auto), or wherever logging.format is pretty; JSON when it is json', () => {
    const tty = sinkOver({}, true);
    tty.log('GET /api/tasks/:id 200 1.5 ms (ops)', 'info', { method: 'GET', route: '/api/tasks/:id', status: 200, principal: 'ops' });
    tty.log('klym: an upstream is down', 'error');
    expect(tty.written[0]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} info {4}GET \/api\/tasks\/:id 200 1\.5 ms \(ops\) method=GET route=\/api\/tasks\/:id status=200 principal=ops\n$/,
    );
    expect(tty.written[1]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} error {3}klym: an upstream is down\n$/);

    const pretty = sinkOver({ KLYM_LOGGING_FORMAT: 'pretty' }, false);
    pretty.log('klym: hello');
    expect(pretty.written[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} info {4}klym: hello\n$/);

    const json = sinkOver({ KLYM_LOGGING_FORMAT: 'json' }, true);
    json.log('klym: hello');
    expect(JSON.parse(json.written[0] as string)).toMatchObject({ level: 'info', msg: 'klym: hello' });
  });

  it('leaves out lines less severe than logging.level, MCP levels mapped in order', () => {
    const { log, written } = sinkOver({ KLYM_LOGGING_LEVEL: 'warning' }, false);
    for (const level of ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const) log(`a ${level} line`, level);
    log('a line of no level (info)');
    expect(written.map((line) => (JSON.parse(line) as { level: string }).level)).toEqual(['warning', 'error', 'critical', 'alert', 'emergency']);
  });

  it('appends JSON lines to the file logging.destination names, on a terminal too (auto)', async () => {
    const file = path.join(cwd, 'klym.log');
    const { log, written, close } = sinkOver({ KLYM_LOGGING_DESTINATION: file }, true);
    log('klym: first');
    log('klym: second', 'notice');
    await close();
    expect(written).toEqual([]);
    const lines = readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toEqual([expect.objectContaining({ level: 'info', msg: 'klym: first' }), expect.objectContaining({ level: 'notice', msg: 'klym: second' })]);
  });
});
