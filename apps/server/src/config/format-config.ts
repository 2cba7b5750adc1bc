import { Document, isMap, isPair, isScalar, isSeq, visit } from 'yaml';
import { isPlainObject, type ConfigPath } from './layers.ts';
import { redactConfig } from './redact.ts';
import { displayPath, type ResolvedConfig } from './resolve-config.ts';

/** Every value of `config` that is not a non-empty section or map: a number, a string, a list, `{}`. */
export function configLeaves(config: unknown, path: ConfigPath = []): { path: ConfigPath; value: unknown }[] {
  if (isPlainObject(config) && Object.keys(config).length > 0) {
    return Object.entries(config).flatMap(([key, child]) => (child === undefined ? [] : configLeaves(child, [...path, key])));
  }
  return [{ path, value: config }];
}

/**
 * The effective configuration as YAML a person can read (and paste into `klym.config.yaml`), with
 * every secret redacted and each value followed by a comment naming its source.
 */
export function formatConfigYaml(resolved: Pick<ResolvedConfig, 'config' | 'sourceOf'>): string {
  const document = new Document(redactConfig(resolved.config));
  visit(document, {
    Pair(_key, pair, ancestors) {
      const value = pair.value;
      const isLeaf = isScalar(value) || isSeq(value) || (isMap(value) && value.items.length === 0);
      if (!isLeaf) return;
      if (isSeq(value) || isMap(value)) value.flow = true;
      const path = [...ancestors, pair].filter(isPair).map((node) => String(isScalar(node.key) ? node.key.value : node.key));
      value.comment = ` ${resolved.sourceOf(path)}`;
    },
  });
  return `# Klym's effective configuration; secrets are redacted, and each value names where it came from.\n${document.toString({ lineWidth: 0 })}`;
}

/** The effective configuration as JSON: `config` with secrets redacted, and `sources` by dotted key. */
export function formatConfigJson(resolved: Pick<ResolvedConfig, 'config' | 'sourceOf'>): string {
  const config = redactConfig(resolved.config);
  const sources = Object.fromEntries(configLeaves(config).map(({ path }) => [displayPath(path), resolved.sourceOf(path)]));
  return `${JSON.stringify({ config, sources }, null, 2)}\n`;
}
