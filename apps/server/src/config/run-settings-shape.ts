import { RUN_SETTINGS } from '@klym/core/server';
import type { z } from 'zod';

type RunSettingRows = typeof RUN_SETTINGS;
/** A row's config name within `Section` (`llm`, or '' for the top level), or `never` when the config keeps it elsewhere. */
type NameIn<Name extends string, Section extends string> = Section extends ''
  ? Name extends `${string}.${string}`
    ? never
    : Name
  : Name extends `${Section}.${infer Rest}`
    ? Rest extends `${string}.${string}`
      ? never
      : Rest
    : never;
/** The rows of {@link RUN_SETTINGS} with a schema that `Section` holds, by their config name. */
type RunSettingsShape<Section extends string> = {
  [
    Key in keyof RunSettingRows as RunSettingRows[Key] extends { readonly config: infer Name extends string; readonly schema: z.ZodType }
      ? NameIn<Name, Section>
      : never
  ]: RunSettingRows[Key] extends {
    readonly schema: infer Schema;
  }
    ? Schema
    : never;
};

/**
 * The keys of a config section (`llm`, or '' for the top level) that hold run settings as they are, from core's
 * `RUN_SETTINGS`, in its order: a row there is its config key, its schema and default, and its env variable here.
 */
export function runSettingsShape<Section extends string>(section: Section): RunSettingsShape<Section> {
  const prefix = section === '' ? '' : `${section}.`;
  const rows = Object.values(RUN_SETTINGS).flatMap((row: { readonly config: string; readonly schema?: z.ZodType }) => {
    const name = row.config.slice(prefix.length);
    return row.schema !== undefined && row.config.startsWith(prefix) && !name.includes('.') ? [[name, row.schema] as const] : [];
  });
  return Object.fromEntries(rows) as RunSettingsShape<Section>;
}
