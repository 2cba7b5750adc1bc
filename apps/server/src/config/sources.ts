import { readFileSync } from 'node:fs';
import path from 'node:path';
import { KlymError } from '@klym/core';
import { parse as parseYaml } from 'yaml';
import { isPlainObject, pathKey, type ConfigLayer, type ConfigPath, type SourceKind } from './layers.ts';
import { nearestName } from './nearest-name.ts';
import { kindAt, parseText, settablePaths } from './schema-paths.ts';

/** One value set from outside a file: by an env variable or a CLI flag. */
export interface Assignment {
  readonly path: ConfigPath;
  /** The value; a string is parsed by the kind of key it sets (number, boolean, list, map). */
  readonly value: unknown;
  /** Where it came from: `env KLYM_SERVER_PORT`, `flag --port`. */
  readonly source: string;
}

/** File names looked for in the working directory when no `--config` is given, in this order. */
export const CONFIG_FILE_NAMES = ['klym.config.yaml', 'klym.config.yml', 'klym.config.json'] as const;

/** The providers' usual variables, and the keys they set. */
const PROVIDER_VARIABLES: Readonly<Record<string, ConfigPath>> = {
  OPENAI_API_KEY: ['llm', 'providers', 'openai', 'apiKey'],
  OPENAI_BASE_URL: ['llm', 'providers', 'openai', 'baseURL'],
  GOOGLE_GENERATIVE_AI_API_KEY: ['llm', 'providers', 'google', 'apiKey'],
};

/** The env variable naming the config file, like `--config`. */
export const CONFIG_FILE_VARIABLE = 'KLYM_CONFIG';

/** A layer of single values (env variables, flags); later assignments to one key win. */
export function layerFromAssignments(kind: SourceKind, assignments: readonly Assignment[]): ConfigLayer {
  const values: Record<string, unknown> = {};
  const sources = new Map<string, string>();
  for (const { path: keyPath, value, source } of assignments) {
    const kindOfKey = kindAt(keyPath);
    const parsed = typeof value === 'string' && kindOfKey !== undefined ? parseText(value, kindOfKey) : value;
    let target = values;
    keyPath.slice(0, -1).forEach((segment) => {
      if (!isPlainObject(target[segment])) target[segment] = {};
      target = target[segment] as Record<string, unknown>;
    });
    target[keyPath.at(-1) as string] = parsed;
    sources.set(pathKey(keyPath), source);
  }
  return {
    kind,
    values,
    describe: (valuePath) => {
      for (let length = valuePath.length; length > 0; length -= 1) {
        const source = sources.get(pathKey(valuePath.slice(0, length)));
        if (source !== undefined) return source;
      }
      return kind;
    },
  };
}

/**
 * The environment's layer: `KLYM_<PATH>` for every key outside a map (`KLYM_SERVER_PORT`,
 * `KLYM_LLM_MODEL`; maps and lists as JSON, lists also comma-separated), plus `OPENAI_API_KEY`,
 * `OPENAI_BASE_URL` and `GOOGLE_GENERATIVE_AI_API_KEY`, which a `KLYM_` variable of the same key overrides.
 *
 * @throws {KlymError} `CONFIG_INVALID` for a `KLYM_` variable that sets no key, naming the nearest one.
 */
export function envLayer(env: Readonly<Record<string, string | undefined>>): ConfigLayer {
  const byName = new Map(settablePaths().map((settable) => [settable.envName, settable.path]));
  const assignments: Assignment[] = [];
  for (const [name, keyPath] of Object.entries(PROVIDER_VARIABLES)) {
    const value = env[name];
    if (value !== undefined && value !== '') assignments.push({ path: keyPath, value, source: `env ${name}` });
  }
  for (const [name, value] of Object.entries(env).toSorted(([left], [right]) => left.localeCompare(right))) {
    if (!name.startsWith('KLYM_') || name === CONFIG_FILE_VARIABLE || value === undefined || value === '') continue;
    const keyPath = byName.get(name);
    if (keyPath === undefined) {
      const nearest = nearestName(name, [...byName.keys(), CONFIG_FILE_VARIABLE]);
      throw new KlymError('CONFIG_INVALID', `Unknown configuration variable ${name} (from env)${nearest === undefined ? '' : `; did you mean ${nearest}?`}`);
    }
    assignments.push({ path: keyPath, value, source: `env ${name}` });
  }
  return layerFromAssignments('env', assignments);
}

/**
 * The config file's layer: `explicit` (from `--config` or `KLYM_CONFIG`), else the first of
 * {@link CONFIG_FILE_NAMES} in `cwd`, else none. `.json` is read as JSON, anything else as YAML.
 *
 * @throws {KlymError} `CONFIG_INVALID` when the file cannot be read or parsed, or is not a map.
 */
export function fileLayer(options: { readonly cwd: string; readonly explicit?: string | undefined }): {
  layer: ConfigLayer | undefined;
  file: string | undefined;
} {
  const candidates =
    options.explicit === undefined ? CONFIG_FILE_NAMES.map((name) => path.resolve(options.cwd, name)) : [path.resolve(options.cwd, options.explicit)];
  for (const file of candidates) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      if (options.explicit === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new KlymError('CONFIG_INVALID', `Cannot read config file ${file}: ${(error as Error).message}`, { cause: error });
    }
    let values: unknown;
    try {
      values = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
    } catch (error) {
      const reason = ((error as Error).message.split('\n')[0] ?? '').trim();
      throw new KlymError('CONFIG_INVALID', `Config file ${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${reason}`, { cause: error });
    }
    values ??= {};
    if (!isPlainObject(values))
      throw new KlymError('CONFIG_INVALID', `Config file ${file} must hold a map of settings, got ${Array.isArray(values) ? 'a list' : typeof values}`);
    const shown = path.relative(options.cwd, file) || file;
    return { layer: { kind: 'file', values, describe: () => `file ${shown.startsWith('..') ? file : shown}` }, file };
  }
  return { layer: undefined, file: undefined };
}
