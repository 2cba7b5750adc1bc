import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { ARTIFACT_DEFAULTS, CODE_DEFAULTS, DEFAULT_MAX_RETRIES } from '../defaults.ts';
import { RUN_SETTINGS, RUN_SETTING_KEYS, type RunSettingsTable, type ServiceRunSettings } from './run-settings.ts';
import type { RunAgentOptions } from './types.ts';

describe('RUN_SETTINGS: the one table of the settings a task service gives every run', () => {
  it('has a row for each service-wide option of runAgent and none besides; the compiler refuses a table that drifts from RunAgentOptions', () => {
    // `pnpm typecheck` checks these (each `@ts-expect-error` fails the build once its line compiles).
    expectTypeOf<keyof typeof RUN_SETTINGS>().toEqualTypeOf<keyof ServiceRunSettings>();
    expectTypeOf<ServiceRunSettings>().toMatchTypeOf<Partial<RunAgentOptions>>();
    // A new field of RunAgentOptions (here `topP`) that no row names.
    type Grown = ServiceRunSettings & { readonly topP?: number };
    // @ts-expect-error the table lacks a row for `topP`
    const missing: RunSettingsTable<Grown> = RUN_SETTINGS;
    // A row naming no option of runAgent.
    // @ts-expect-error `topK` is no option of runAgent
    const extra: RunSettingsTable<ServiceRunSettings> = { ...RUN_SETTINGS, topK: { config: 'llm.topK', schema: z.number().optional() } };
    // A row whose schema yields what the option does not take.
    // @ts-expect-error `temperature` is a number
    const mistyped: RunSettingsTable<ServiceRunSettings> = { ...RUN_SETTINGS, temperature: { config: 'llm.temperature', schema: z.string().optional() } };
    for (const table of [missing, extra, mistyped]) expect(Object.keys(table)).toEqual(expect.arrayContaining([...RUN_SETTING_KEYS]));
    expect(RUN_SETTING_KEYS).toEqual(Object.keys(RUN_SETTINGS));
  });

  it('gives each setting the config key of its own name, and the defaults runAgent has without it', () => {
    // `upstreamTools` is built from each upstream's `tools`; every other setting is its config key's own name.
    expect(Object.entries(RUN_SETTINGS).flatMap(([key, row]) => (row.config.split('.').at(-1) === key ? [] : [key]))).toEqual(['upstreamTools']);
    const defaults = Object.fromEntries(Object.entries(RUN_SETTINGS).flatMap(([key, row]) => ('schema' in row ? [[key, row.schema.parse(undefined)]] : [])));
    expect(defaults).toEqual({
      temperature: undefined,
      prices: {},
      contextWindows: {},
      mapModel: undefined,
      mapConcurrency: ARTIFACT_DEFAULTS.mapConcurrency,
      mapChunkTokens: ARTIFACT_DEFAULTS.mapChunkTokens,
      artifactThresholdTokens: undefined,
      maxRetries: DEFAULT_MAX_RETRIES,
      policies: {},
      readOnlyTools: [],
      code: CODE_DEFAULTS,
    });
    expect(() => RUN_SETTINGS.temperature.schema.parse(3)).toThrow(/<=2/);
    expect(() => RUN_SETTINGS.policies.schema.parse({ 'no spaces': {} })).toThrow(/expected a policy name of letters, digits/);
  });
});
