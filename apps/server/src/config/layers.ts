/** Where configuration values come from, lowest precedence first. */
export type SourceKind = 'default' | 'file' | 'env' | 'flag';

/** Precedence of each source kind: a higher one overrides a lower one. */
export const SOURCE_ORDER: readonly SourceKind[] = ['default', 'file', 'env', 'flag'];

/** A path into the configuration: object keys, map keys, list indexes. */
export type ConfigPath = readonly string[];

/** One source's values, and for each of its values the exact place it came from (`env KLYM_SERVER_PORT`). */
export interface ConfigLayer {
  readonly kind: SourceKind;
  /** A partial configuration; keys it leaves out (or sets to `undefined`) keep the lower layers' values. */
  readonly values: Readonly<Record<string, unknown>>;
  /** Names the source of the value at `path` (a value of this layer). */
  describe(path: ConfigPath): string;
}

/** The merged configuration, before validation, with the source of every value in it. */
export interface MergedLayers {
  readonly values: Record<string, unknown>;
  /** The source of each leaf (anything but a plain object), keyed by {@link pathKey}. */
  readonly sources: ReadonlyMap<string, string>;
}

/** A stable map key for a path. */
export const pathKey = (path: ConfigPath): string => JSON.stringify(path);

/** Whether the path keyed `key` lies strictly under `path`. */
function isUnder(key: string, path: ConfigPath): boolean {
  return key.startsWith(path.length === 0 ? '[' : `${pathKey(path).slice(0, -1)},`) && key !== '[]';
}

/** Whether `value` is a plain object (what merges key by key), not a list, null or a class instance. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * Merges layers in the order given, each over the ones before: plain objects (sections and maps alike)
 * merge key by key, anything else — a number, a string, a list — replaces what was below. A value that
 * is absent or `undefined` never erases a lower one.
 */
export function mergeLayers(layers: readonly ConfigLayer[]): MergedLayers {
  const sources = new Map<string, string>();
  const forget = (path: ConfigPath): void => {
    for (const key of Array.from(sources.keys())) if (key === pathKey(path) || isUnder(key, path)) sources.delete(key);
  };
  const mergeInto = (target: Record<string, unknown>, source: Readonly<Record<string, unknown>>, path: ConfigPath, layer: ConfigLayer): void => {
    for (const [key, value] of Object.entries(source)) {
      if (value === undefined) continue;
      const childPath = [...path, key];
      if (isPlainObject(value)) {
        if (!isPlainObject(target[key])) {
          forget(childPath);
          target[key] = {};
        }
        mergeInto(target[key] as Record<string, unknown>, value, childPath, layer);
      } else {
        forget(childPath);
        target[key] = structuredClone(value);
        sources.set(pathKey(childPath), layer.describe(childPath));
      }
    }
  };
  const values: Record<string, unknown> = {};
  for (const layer of layers) mergeInto(values, layer.values, [], layer);
  return { values, sources };
}

/**
 * The source of the value at `path`: its own, else that of the first value under it (an object that
 * is wrong as a whole, like an upstream with neither `url` nor `command`), else that of the nearest
 * value above it, else `default`.
 */
export function sourceOf(sources: ReadonlyMap<string, string>, path: ConfigPath): string {
  const own = sources.get(pathKey(path));
  if (own !== undefined) return own;
  for (const [key, source] of sources) if (isUnder(key, path)) return source;
  for (let length = path.length - 1; length > 0; length -= 1) {
    const above = sources.get(pathKey(path.slice(0, length)));
    if (above !== undefined) return above;
  }
  return 'default';
}
