import { isKlymError } from '@klym/core';
import { describe, expect, it } from 'vitest';
import { parseCommand, type CommandLine } from './parse-command.ts';

const line = (argv: string[]): CommandLine => {
  const parsed = parseCommand(argv);
  if (parsed.command === 'help') throw new Error('expected a command, got help');
  return parsed;
};

const refusal = (argv: string[]): string => {
  try {
    parseCommand(argv);
  } catch (error) {
    if (isKlymError(error, 'INVALID_ARGUMENT')) return error.message;
    throw error;
  }
  throw new Error(`expected ${argv.join(' ')} to be refused`);
};

describe('parseCommand', () => {
  it('turns each flag into the key it sets, naming the flag as the source', () => {
    const parsed = line([
      'run',
      'check',
      'the',
      'graph',
      '--model',
      'openai:gpt-4.1-mini',
      '--max-steps',
      '7',
      '--allow',
      'grynya__*',
      '--allow',
      'memory__read_graph',
      '--policy',
      'read-only',
      '--log-level',
      'debug',
    ]);
    expect(parsed.prompt).toBe('check the graph');
    expect(parsed.assignments).toEqual([
      { path: ['llm', 'model'], value: 'openai:gpt-4.1-mini', source: 'flag --model' },
      { path: ['logging', 'level'], value: 'debug', source: 'flag --log-level' },
      { path: ['budget', 'default', 'maxSteps'], value: '7', source: 'flag --max-steps' },
      { path: ['tools', 'allow'], value: ['grynya__*', 'memory__read_graph'], source: 'flag --allow' },
      { path: ['tools', 'policy'], value: 'read-only', source: 'flag --policy' },
    ]);
  });

  it('reads --upstream NAME=URL, --set KEY=VALUE and --config for serve', () => {
    const parsed = line([
      'serve',
      '-c',
      'klym.yaml',
      '--upstream',
      'grynya=http://127.0.0.1:8000/sse?a=b',
      '--set',
      'tasks.concurrency=8',
      '--port',
      '0',
      '--stdio',
    ]);
    expect(parsed).toMatchObject({ command: 'serve', configFile: 'klym.yaml', stdio: true });
    expect(parsed.assignments).toEqual([
      { path: ['server', 'port'], value: '0', source: 'flag --port' },
      { path: ['upstreams', 'grynya', 'url'], value: 'http://127.0.0.1:8000/sse?a=b', source: 'flag --upstream grynya=…' },
      { path: ['tasks', 'concurrency'], value: '8', source: 'flag --set tasks.concurrency' },
    ]);
  });

  it("sets a worker's --host and --port on its health endpoint (worker.*), not on server.*", () => {
    expect(line(['worker', '--port', '0']).assignments).toEqual([{ path: ['worker', 'port'], value: '0', source: 'flag --port' }]);
    expect(line(['worker', '--host', '0.0.0.0', '-p', '9100', '--set', 'server.port=1']).assignments).toEqual([
      { path: ['worker', 'host'], value: '0.0.0.0', source: 'flag --host' },
      { path: ['worker', 'port'], value: '9100', source: 'flag --port' },
      { path: ['server', 'port'], value: '1', source: 'flag --set server.port' },
    ]);
    expect(parseCommand(['worker', '--help'])).toEqual({ command: 'help', topic: 'worker' });
    expect(refusal(['worker', '--stdio'])).toMatch(/^Unknown option '--stdio' \(see `klym worker --help`\)$/);
  });

  it('knows --progress, --no-progress and --json', () => {
    expect(line(['run', 'x']).progress).toBeUndefined();
    expect(line(['run', 'x', '--progress']).progress).toBe(true);
    expect(line(['run', 'x', '--no-progress']).progress).toBe(false);
    expect(line(['config', '--json', '--port', '1']).json).toBe(true);
  });

  it('answers help for no command, --help, help COMMAND and COMMAND --help', () => {
    expect(parseCommand([])).toEqual({ command: 'help', topic: undefined });
    expect(parseCommand(['--help'])).toEqual({ command: 'help', topic: undefined });
    expect(parseCommand(['help', 'run'])).toEqual({ command: 'help', topic: 'run' });
    expect(parseCommand(['serve', '-h'])).toEqual({ command: 'help', topic: 'serve' });
  });

  it('refuses what it does not understand, pointing at the right --help', () => {
    expect(refusal(['launch'])).toBe('Unknown command "launch" (see `klym --help`)');
    expect(refusal(['run'])).toBe('Expected a prompt: klym run "what to do" (see `klym run --help`)');
    expect(refusal(['run', 'x', '--stdio'])).toMatch(/^Unknown option '--stdio' \(see `klym run --help`\)$/);
    expect(refusal(['serve', '--port'])).toMatch(/Option '-p, --port <value>' argument missing/);
    expect(refusal(['serve', 'extra'])).toBe('Unexpected argument "extra" (see `klym serve --help`)');
    expect(refusal(['serve', '--upstream', 'grynya'])).toBe('Expected --upstream NAME=URL, got "grynya" (see `klym serve --help`)');
    expect(refusal(['config', '--set', 'server.port'])).toMatch(/^Expected --set KEY=VALUE/);
    expect(refusal(['run', 'x', '--progress', '--no-progress'])).toMatch(/at most one of --progress and --no-progress/);
  });
});
