import type { z } from 'zod';
import { configObjectSchema } from './schema.ts';

/** What a key holds, as far as turning a string (an env variable, a flag) into its value goes. */
export type ValueKind = 'object' | 'record' | 'array' | 'number' | 'boolean' | 'string';

/** A key the schema knows, with the environment variable that sets it. */
export interface SettablePath {
  readonly path: readonly string[];
  readonly kind: ValueKind;
  /** `KLYM_` plus the path in upper snake case: `server.allowedHosts` → `KLYM_SERVER_ALLOWED_HOSTS`. */
  readonly envName: string;
}

type AnySchema = z.ZodType;

interface Definition {
  readonly type: string;
  readonly innerType?: AnySchema;
  readonly in?: AnySchema;
  readonly shape?: Record<string, AnySchema>;
  readonly valueType?: AnySchema;
  readonly element?: AnySchema;
}

const definitionOf = (schema: AnySchema): Definition => schema.def as unknown as Definition;

function unwrap(schema: AnySchema): AnySchema {
  let current = schema;
  for (;;) {
    const definition = definitionOf(current);
    if (definition.innerType !== undefined) current = definition.innerType;
    else if (definition.type === 'pipe' && definition.in !== undefined) current = definition.in;
    else return current;
  }
}

function kindOf(schema: AnySchema): ValueKind {
  const type = definitionOf(unwrap(schema)).type;
  if (type === 'object' || type === 'record' || type === 'array' || type === 'number' || type === 'boolean') return type;
  return 'string';
}

/** The schema of the value at `path` (walking into objects, map values and array items), or `undefined` for an unknown key. */
export function schemaAt(path: readonly string[], root: AnySchema = configObjectSchema): AnySchema | undefined {
  let current: AnySchema | undefined = root;
  for (const segment of path) {
    if (current === undefined) return undefined;
    const definition = definitionOf(unwrap(current));
    if (definition.type === 'object') current = definition.shape?.[segment];
    else if (definition.type === 'record') current = definition.valueType;
    else if (definition.type === 'array' && /^\d+$/.test(segment)) current = definition.element;
    else return undefined;
  }
  return current;
}

/** The keys of the section at `path`, or none when it is not a section. */
export function keysAt(path: readonly string[]): string[] {
  const schema = schemaAt(path);
  return schema === undefined ? [] : Object.keys(definitionOf(unwrap(schema)).shape ?? {});
}

/** What the key at `path` holds, or `undefined` for an unknown key. */
export function kindAt(path: readonly string[]): ValueKind | undefined {
  const schema = schemaAt(path);
  return schema === undefined ? undefined : kindOf(schema);
}

/** `allowedHosts` → `ALLOWED_HOSTS`, `baseURL` → `BASE_URL`. */
export function upperSnake(key: string): string {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .replace(/-/g, '_')
    .toUpperCase();
}

/** Every key with a fixed path (not inside a map), down to maps, lists and plain values: each can be set by one env variable. */
export function settablePaths(): readonly SettablePath[] {
  const found: SettablePath[] = [];
  const walk = (schema: AnySchema, path: string[]): void => {
    const definition = definitionOf(unwrap(schema));
    if (definition.type === 'object') {
      for (const [key, child] of Object.entries(definition.shape ?? {})) walk(child, [...path, key]);
      return;
    }
    found.push({ path, kind: kindOf(schema), envName: `KLYM_${path.map(upperSnake).join('_')}` });
  };
  walk(configObjectSchema, []);
  return found;
}

/**
 * Turns the text of an env variable or a flag into a value of `kind`: numbers and booleans are parsed,
 * lists are JSON (`["a","b"]`) or comma-separated, maps and objects are JSON. Text that does not parse
 * is returned as is, so that validation names the key and what was expected.
 */
export function parseText(text: string, kind: ValueKind): unknown {
  const trimmed = text.trim();
  switch (kind) {
    case 'number':
      return trimmed !== '' && Number.isFinite(Number(trimmed)) ? Number(trimmed) : text;
    case 'boolean':
      if (/^(true|1|yes|on)$/i.test(trimmed)) return true;
      if (/^(false|0|no|off)$/i.test(trimmed)) return false;
      return text;
    case 'array':
      if (trimmed.startsWith('[')) return parseJson(trimmed);
      return trimmed
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    case 'record':
    case 'object':
      return trimmed.startsWith('{') ? parseJson(trimmed) : text;
    default:
      return text;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
