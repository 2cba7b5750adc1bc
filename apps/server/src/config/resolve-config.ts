import { KlymError } from '@klym/core';
import type { z } from 'zod';
import { isPlainObject, mergeLayers, pathKey, sourceOf, type ConfigLayer, type ConfigPath } from './layers.ts';
import { nearestName } from './nearest-name.ts';
import { isSecretPath, REDACTED } from './redact.ts';
import { crossCheck } from './cross-check.ts';
import { configObjectSchema, type KlymConfig } from './schema.ts';
import { keysAt } from './schema-paths.ts';
import { CONFIG_FILE_VARIABLE, envLayer, fileLayer, layerFromAssignments, type Assignment } from './sources.ts';
import { upstreamFromMcpServer } from './upstream-schema.ts';

/** Options of {@link resolveConfig}: the sources, passed in so that nothing here reads the process. */
export interface ResolveConfigOptions {
  /** Where `klym.config.yaml|yml|json` is looked for, and relative paths resolve. */
  readonly cwd: string;
  /** The environment: `KLYM_*`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `GOOGLE_GENERATIVE_AI_API_KEY`, `KLYM_CONFIG`. @default {} */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The config file named by `--config`; wins over `KLYM_CONFIG` and the files in `cwd`. */
  readonly configFile?: string | undefined;
  /** Values set by CLI flags, the highest source. @default [] */
  readonly flags?: readonly Assignment[];
}

/** The effective configuration and where each of its values came from. */
export interface ResolvedConfig {
  readonly config: KlymConfig;
  /** The config file read, if any. */
  readonly file: string | undefined;
  /** Where the value at `path` came from: `default`, `file klym.config.yaml`, `env KLYM_SERVER_PORT`, `flag --port`. */
  sourceOf(path: ConfigPath): string;
}

/** The defaults, as the schema fills them in for an empty configuration. */
export function defaultConfig(): KlymConfig {
  return finish(configObjectSchema.parse({}), new Map()).config;
}

/**
 * Builds the effective configuration from its sources, each overriding the one before: the schema's
 * defaults < the config file < the environment < CLI flags. Sections and maps merge key by key; a
 * source that leaves a key out keeps the value below it.
 *
 * @throws {KlymError} `CONFIG_INVALID` naming, for every problem, the key, what is wrong with its value,
 * and the source it came from: `server.port: expected number, received string "abc" (env KLYM_SERVER_PORT)`.
 * @example
 * ```ts
 * const { config, sourceOf } = resolveConfig({ cwd: process.cwd(), env: process.env, flags: [{ path: ['server', 'port'], value: '9000', source: 'flag --port' }] })
 * sourceOf(['server', 'port']) // 'flag --port'
 * ```
 */
export function resolveConfig(options: ResolveConfigOptions): ResolvedConfig {
  const env = options.env ?? {};
  const defaults: ConfigLayer = { kind: 'default', values: configObjectSchema.parse({}), describe: () => 'default' };
  const explicit = options.configFile ?? (env[CONFIG_FILE_VARIABLE] === '' ? undefined : env[CONFIG_FILE_VARIABLE]);
  const { layer: file, file: fileName } = fileLayer({ cwd: options.cwd, explicit });
  const layers = [defaults, ...(file === undefined ? [] : [file]), envLayer(env), layerFromAssignments('flag', options.flags ?? [])];
  const merged = mergeLayers(layers);

  const parsed = configObjectSchema.safeParse(merged.values);
  const problems: string[] = [];
  if (parsed.success) {
    for (const issue of crossCheck(parsed.data)) problems.push(describeProblem(issue.path.map(String), issue.message, merged));
  } else {
    for (const issue of parsed.error.issues) problems.push(...describeIssue(issue, merged));
  }
  if (!parsed.success || problems.length > 0) {
    throw new KlymError('CONFIG_INVALID', `Invalid configuration: ${problems.join('; ')}`);
  }
  return { ...finish(parsed.data, merged.sources), file: fileName };
}

function finish(parsed: z.output<typeof configObjectSchema>, sources: ReadonlyMap<string, string>): Omit<ResolvedConfig, 'file'> {
  const { mcpServers, ...rest } = parsed;
  const upstreams = { ...rest.upstreams };
  const copied = new Map(sources);
  for (const [name, server] of Object.entries(mcpServers)) {
    upstreams[name] = upstreamFromMcpServer(server);
    const from = `${pathKey(['mcpServers', name]).slice(0, -1)},`;
    const to = `${pathKey(['upstreams', name]).slice(0, -1)},`;
    for (const [key, source] of sources) if (key.startsWith(from)) copied.set(to + key.slice(from.length), source);
    // The desktop clients' names for two keys: their sources follow the value to Klym's name.
    const renamed = [
      [['type'], ['transport']],
      [['timeout'], ['timeouts', 'requestMs']],
    ] as const;
    for (const [old, now] of renamed) {
      const source = sources.get(pathKey(['mcpServers', name, ...old]));
      if (source !== undefined && !copied.has(pathKey(['upstreams', name, ...now]))) copied.set(pathKey(['upstreams', name, ...now]), source);
    }
  }
  return { config: { ...rest, upstreams }, sourceOf: (path) => sourceOf(copied, path) };
}

function describeIssue(issue: z.core.$ZodIssue, merged: ReturnType<typeof mergeLayers>): string[] {
  const path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    const known = keysAt(path);
    return issue.keys.map((key) => {
      const nearest = nearestName(key, known);
      return describeProblem([...path, key], `unknown key${nearest === undefined ? '' : ` (did you mean "${nearest}"?)`}`, merged, false);
    });
  }
  if (issue.code === 'invalid_key') {
    // A map key the key schema refused (an upstream name with a space): say why, about the key itself.
    const reason = issue.issues.map((inner) => inner.message).join(', ');
    return [describeProblem(path, reason, merged, false)];
  }
  return [describeProblem(path, issue.message.replace(/^Invalid input: /, ''), merged)];
}

function describeProblem(path: ConfigPath, message: string, merged: ReturnType<typeof mergeLayers>, showValue = true): string {
  const value = valueAt(merged.values, path);
  const shown = !showValue || value === undefined || isPlainObject(value) ? '' : ` = ${isSecretPath(path) ? REDACTED : truncate(JSON.stringify(value))}`;
  return `${displayPath(path)}${shown}: ${message} (${sourceOf(merged.sources, path)})`;
}

/** A path as a person reads it: `upstreams.grynya.url`, `llm.prices["openai:gpt-4.1"]`. */
export function displayPath(path: ConfigPath): string {
  if (path.length === 0) return '(top level)';
  return path
    .map((segment, index) =>
      /^[A-Za-z_$][\w$-]*$/.test(segment) ? `${index === 0 ? '' : '.'}${segment}` : /^\d+$/.test(segment) ? `[${segment}]` : `[${JSON.stringify(segment)}]`,
    )
    .join('');
}

function valueAt(values: unknown, path: ConfigPath): unknown {
  let current = values;
  for (const segment of path) current = isPlainObject(current) || Array.isArray(current) ? (current as Record<string, unknown>)[segment] : undefined;
  return current;
}

const truncate = (text: string): string => (text.length > 80 ? `${text.slice(0, 77)}…` : text);
