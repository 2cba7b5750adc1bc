import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { mergeLayers, pathKey, type ConfigLayer } from './layers.ts';
import { defaultConfig, resolveConfig } from './resolve-config.ts';

const directory = mkdtempSync(path.join(tmpdir(), 'klym-layering-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** Keys of every kind, with how each source names them and values it may hold. */
const KEYS = [
  { path: ['server', 'port'], env: 'KLYM_SERVER_PORT', flag: 'server.port', value: fc.integer({ min: 0, max: 65_535 }) },
  {
    path: ['llm', 'model'],
    env: 'KLYM_LLM_MODEL',
    flag: 'llm.model',
    value: fc.constantFrom('scripted', 'openai:gpt-4.1-mini', 'google:gemini-2.5-flash', 'compatible:llama3'),
  },
  { path: ['tasks', 'concurrency'], env: 'KLYM_TASKS_CONCURRENCY', flag: 'tasks.concurrency', value: fc.integer({ min: 1, max: 64 }) },
  { path: ['logging', 'level'], env: 'KLYM_LOGGING_LEVEL', flag: 'logging.level', value: fc.constantFrom('debug', 'info', 'warning', 'error') },
  { path: ['writeBack', 'enabled'], env: 'KLYM_WRITE_BACK_ENABLED', flag: 'writeBack.enabled', value: fc.boolean() },
  {
    path: ['server', 'allowedHosts'],
    env: 'KLYM_SERVER_ALLOWED_HOSTS',
    flag: 'server.allowedHosts',
    value: fc.array(fc.constantFrom('localhost', 'klym', 'grynya.local'), { maxLength: 3 }),
  },
] as const;

type Sources = { file?: unknown; env?: unknown; flag?: unknown };
const sourcesArbitrary = fc.tuple(
  ...KEYS.map((key) => fc.record({ file: key.value, env: key.value, flag: key.value }, { requiredKeys: [] }) as fc.Arbitrary<Sources>),
);

function nest(entries: readonly { path: readonly string[]; value: unknown }[]): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const { path: keyPath, value } of entries) {
    let target = root;
    for (const segment of keyPath.slice(0, -1)) target = (target[segment] ??= {}) as Record<string, unknown>;
    target[keyPath.at(-1) as string] = value;
  }
  return root;
}

// Lists go through the environment as JSON (an empty variable counts as unset) and through flags comma-separated.
const asText = (value: unknown, form: 'json' | 'comma'): string =>
  Array.isArray(value) ? (form === 'json' ? JSON.stringify(value) : value.join(',')) : String(value);
const read = (config: unknown, keyPath: readonly string[]): unknown =>
  keyPath.reduce<unknown>((value, segment) => (value as Record<string, unknown>)[segment], config);

describe('configuration layering (property-based)', () => {
  it('any combination of file, env and flags obeys defaults < file < env < flags, and names the winning source', () => {
    let run = 0;
    fc.assert(
      fc.property(sourcesArbitrary, fc.constantFrom('yaml', 'json'), (perKey, format) => {
        run += 1;
        const file = path.join(directory, `case-${run}.${format}`);
        const fileValues = nest(KEYS.flatMap((key, index) => ('file' in perKey[index]! ? [{ path: key.path, value: perKey[index]!.file }] : [])));
        writeFileSync(file, format === 'json' ? JSON.stringify(fileValues) : `# generated\n${JSON.stringify(fileValues)}\n`);
        const env = Object.fromEntries(KEYS.flatMap((key, index) => ('env' in perKey[index]! ? [[key.env, asText(perKey[index]!.env, 'json')]] : [])));
        const flags = KEYS.flatMap((key, index) =>
          'flag' in perKey[index]! ? [{ path: key.path, value: asText(perKey[index]!.flag, 'comma'), source: `flag --set ${key.flag}` }] : [],
        );

        // The providers' settings that models other than `scripted` need, so that any model value is valid.
        const providers = {
          OPENAI_API_KEY: 'sk-test',
          GOOGLE_GENERATIVE_AI_API_KEY: 'g-test',
          KLYM_LLM_PROVIDERS_COMPATIBLE_BASE_URL: 'http://127.0.0.1:11434/v1',
        };
        const { config, sourceOf } = resolveConfig({ cwd: directory, configFile: file, env: { ...providers, ...env }, flags });
        const defaults = defaultConfig();
        KEYS.forEach((key, index) => {
          const sources = perKey[index]!;
          const [expected, source] =
            'flag' in sources
              ? [sources.flag, `flag --set ${key.flag}`]
              : 'env' in sources
                ? [sources.env, `env ${key.env}`]
                : 'file' in sources
                  ? [sources.file, `file case-${run}.${format}`]
                  : [read(defaults, key.path), 'default'];
          expect(read(config, key.path)).toEqual(expected);
          expect(sourceOf(key.path)).toBe(source);
        });
      }),
      { numRuns: 60 },
    );
  });

  it('an absent or undefined value never erases a lower one, and maps merge key by key', () => {
    const mapArbitrary = fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd'), fc.oneof(fc.integer(), fc.constant(undefined)), { maxKeys: 4 });
    fc.assert(
      fc.property(
        fc.array(fc.record({ map: mapArbitrary, leaf: fc.option(fc.integer(), { nil: undefined }) }), { minLength: 1, maxLength: 4 }),
        (layerValues) => {
          const layers: ConfigLayer[] = layerValues.map((values, index) => ({ kind: 'file', values: { section: values }, describe: () => `layer ${index}` }));
          const merged = mergeLayers(layers);
          const section = (merged.values.section ?? {}) as { map?: Record<string, unknown>; leaf?: unknown };
          for (const name of ['a', 'b', 'c', 'd']) {
            const setters = layerValues.map((values, index) => [values.map[name], index] as const).filter(([value]) => value !== undefined);
            const last = setters.at(-1);
            expect(section.map?.[name]).toBe(last?.[0]);
            expect(merged.sources.get(pathKey(['section', 'map', name]))).toBe(last === undefined ? undefined : `layer ${last[1]}`);
          }
          const leafSetters = layerValues.filter((values) => values.leaf !== undefined);
          expect(section.leaf).toBe(leafSetters.at(-1)?.leaf);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('upstreams from the file, the environment and flags merge into one map; a higher source adds keys to an entry without erasing its others', () => {
    fc.assert(
      fc.property(fc.subarray(['alpha', 'beta', 'gamma']), fc.subarray(['beta', 'delta']), fc.subarray(['alpha', 'epsilon']), (inFile, inEnv, inFlags) => {
        const file = path.join(directory, 'upstreams.json');
        writeFileSync(
          file,
          JSON.stringify({ upstreams: Object.fromEntries(inFile.map((name) => [name, { url: `http://127.0.0.1:1/${name}`, pool: { max: 2 } }])) }),
        );
        const env = { KLYM_UPSTREAMS: JSON.stringify(Object.fromEntries(inEnv.map((name) => [name, { url: `http://127.0.0.1:2/${name}` }]))) };
        const flags = inFlags.map((name) => ({ path: ['upstreams', name, 'url'], value: `http://127.0.0.1:3/${name}`, source: '--upstream' }));
        const { config } = resolveConfig({ cwd: directory, configFile: file, env, flags });
        const names = [...new Set([...inFile, ...inEnv, ...inFlags])].toSorted();
        expect(Object.keys(config.upstreams).toSorted()).toEqual(names);
        for (const name of names) {
          const port = inFlags.includes(name) ? 3 : inEnv.includes(name) ? 2 : 1;
          expect(config.upstreams[name]?.url).toBe(`http://127.0.0.1:${port}/${name}`);
          expect(config.upstreams[name]?.pool?.max).toBe(inFile.includes(name) ? 2 : undefined);
        }
      }),
      { numRuns: 40 },
    );
  });
});
