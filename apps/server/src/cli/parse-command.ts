import { parseArgs, type ParseArgsConfig } from 'node:util';
import { KlymError } from '@klym/core';
import type { Assignment } from '../config/sources.ts';

/** The commands of `klym`. */
export type CommandName = 'serve' | 'worker' | 'run' | 'config';

/** A command line, understood: help, or a command with its options. */
export type ParsedCommand = { readonly command: 'help'; readonly topic: CommandName | undefined } | CommandLine;

/** A command to run, with what its flags set. */
export interface CommandLine {
  readonly command: CommandName;
  /** `--config FILE`. */
  readonly configFile: string | undefined;
  /** What the flags set in the configuration, the highest source. */
  readonly assignments: readonly Assignment[];
  /** `klym run`'s prompt. */
  readonly prompt: string;
  /** `klym serve --stdio`. */
  readonly stdio: boolean;
  /** `klym config --json`. */
  readonly json: boolean;
  /** `klym run --progress` / `--no-progress`; `undefined` means: when stderr is a terminal. */
  readonly progress: boolean | undefined;
}

type Options = NonNullable<ParseArgsConfig['options']>;

const COMMON: Options = {
  config: { type: 'string', short: 'c' },
  set: { type: 'string', multiple: true },
  upstream: { type: 'string', multiple: true },
  model: { type: 'string', short: 'm' },
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

const SERVER_FLAGS: Options = { host: { type: 'string' }, port: { type: 'string', short: 'p' } };
const RUN_FLAGS: Options = {
  'system-prompt': { type: 'string' },
  'max-steps': { type: 'string' },
  'max-tokens': { type: 'string' },
  'max-cost-usd': { type: 'string' },
  'timeout-ms': { type: 'string' },
  allow: { type: 'string', multiple: true },
  deny: { type: 'string', multiple: true },
  policy: { type: 'string' },
};

const OPTIONS: Record<CommandName, Options> = {
  serve: { ...COMMON, ...SERVER_FLAGS, stdio: { type: 'boolean' } },
  worker: { ...COMMON, ...SERVER_FLAGS },
  run: { ...COMMON, ...RUN_FLAGS, progress: { type: 'boolean' }, 'no-progress': { type: 'boolean' } },
  // `klym config` takes every flag that sets a key, to show what a `serve` or `run` command line would use.
  config: { ...COMMON, ...SERVER_FLAGS, ...RUN_FLAGS, json: { type: 'boolean' } },
};

/** Flags that set one configuration key, and the key. */
const KEY_FLAGS: Readonly<Record<string, readonly string[]>> = {
  host: ['server', 'host'],
  port: ['server', 'port'],
  model: ['llm', 'model'],
  'log-level': ['logging', 'level'],
  'system-prompt': ['systemPrompt'],
  'max-steps': ['budget', 'default', 'maxSteps'],
  'max-tokens': ['budget', 'default', 'maxTokens'],
  'max-cost-usd': ['budget', 'default', 'maxCostUsd'],
  'timeout-ms': ['budget', 'default', 'timeoutMs'],
  allow: ['tools', 'allow'],
  deny: ['tools', 'deny'],
  policy: ['tools', 'policy'],
};

const usage = (command: string, message: string): KlymError =>
  new KlymError('INVALID_ARGUMENT', `${message} (see \`klym ${command === 'klym' ? '' : `${command} `}--help\`)`);

/**
 * Parses `klym`'s arguments (without `node` and the script).
 * @throws {KlymError} `INVALID_ARGUMENT` for an unknown command or option, a missing value or prompt.
 */
export function parseCommand(argv: readonly string[]): ParsedCommand {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h') return { command: 'help', topic: undefined };
  if (first === 'help') {
    const topic = rest[0];
    if (topic !== undefined && !(topic in OPTIONS)) throw usage('klym', `Unknown command "${topic}"`);
    return { command: 'help', topic: topic as CommandName | undefined };
  }
  if (!(first in OPTIONS)) throw usage('klym', first.startsWith('-') ? `Unknown option ${first}; expected a command first` : `Unknown command "${first}"`);
  const command = first as CommandName;

  let parsed: { values: Record<string, string | boolean | (string | boolean)[] | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...rest], options: OPTIONS[command], allowPositionals: true, strict: true });
  } catch (error) {
    throw usage(command, (error as Error).message.split('.')[0] ?? 'Invalid arguments');
  }
  const { values, positionals } = parsed;
  if (values.help === true) return { command: 'help', topic: command };

  const assignments: Assignment[] = [];
  for (const [flag, keyPath] of Object.entries(KEY_FLAGS)) {
    const value = values[flag];
    if (value === undefined) continue;
    // A worker's --host and --port are those of its health endpoint.
    const target = command === 'worker' && keyPath[0] === 'server' ? ['worker', ...keyPath.slice(1)] : keyPath;
    assignments.push({ path: target, value: Array.isArray(value) ? value.map(String) : value, source: `flag --${flag}` });
  }
  for (const text of (values.upstream as string[] | undefined) ?? []) {
    const [name, url] = splitPair(text);
    if (name === '' || url === '') throw usage(command, `Expected --upstream NAME=URL, got "${text}"`);
    assignments.push({ path: ['upstreams', name, 'url'], value: url, source: `flag --upstream ${name}=…` });
  }
  for (const text of (values.set as string[] | undefined) ?? []) {
    const [key, value] = splitPair(text);
    if (key === '' || !text.includes('=')) throw usage(command, `Expected --set KEY=VALUE (a dotted key such as server.port=9000), got "${text}"`);
    assignments.push({ path: key.split('.'), value, source: `flag --set ${key}` });
  }

  const prompt = positionals.join(' ').trim();
  if (command === 'run' && prompt === '') throw usage(command, 'Expected a prompt: klym run "what to do"');
  if (command !== 'run' && positionals.length > 0) throw usage(command, `Unexpected argument "${positionals[0]}"`);
  if (values.progress === true && values['no-progress'] === true) throw usage(command, 'Expected at most one of --progress and --no-progress');
  return {
    command,
    configFile: values.config as string | undefined,
    assignments,
    prompt,
    stdio: values.stdio === true,
    json: values.json === true,
    progress: values.progress === true ? true : values['no-progress'] === true ? false : undefined,
  };
}

function splitPair(text: string): [string, string] {
  const at = text.indexOf('=');
  return at < 0 ? [text.trim(), ''] : [text.slice(0, at).trim(), text.slice(at + 1)];
}
