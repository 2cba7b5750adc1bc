/**
 * `@klym/core/artifacts`: heavy results kept whole outside the conversation — the artifact store a run saves
 * them in, the reader that pages and greps them, and the SQL query over their records, which runs DuckDB in
 * processes of its own. `runAgent` and the task manager build these themselves; this entry point is for an agent
 * that keeps, reads or queries artifacts on its own.
 *
 * @example
 * ```ts
 * import { createArtifactStore } from '@klym/core/artifacts';
 *
 * const artifacts = createArtifactStore({ maxBytes: 64 * 1024 * 1024 });
 * ```
 * @module
 */
export type { ArtifactLimits } from './artifacts/artifact-limit.ts';
export {
  createArtifactStore,
  createMemoryArtifacts,
  type ArtifactGrep,
  type ArtifactMatch,
  type ArtifactSlice,
  type ArtifactStore,
  type ArtifactStoreOptions,
  type KeepAs,
  type ReadRequest,
  type SliceLine,
} from './artifacts/artifact-store.ts';
export { createArtifactReader, type ArtifactRanges, type ArtifactReader, type ArtifactReaderOptions } from './artifacts/artifact-reader.ts';
export type { ArtifactBackend, ArtifactInfo, ArtifactRecords, QueryPage, StoredArtifact } from './artifacts/artifact-types.ts';
export type { ColumnType } from './artifacts/record-types.ts';
export type { LineIndex } from './artifacts/artifact-text.ts';
export type { QuerySource } from './artifacts/query-text.ts';
export type { RecordsLayout } from './artifacts/artifact-records.ts';
export {
  QUERY_DEFAULTS,
  createArtifactQuery,
  createQueryProcesses,
  type ArtifactQuery,
  type ArtifactQueryOptions,
  type QueryAnswer,
  type QueryCallOptions,
  type QueryColumn,
  type QueryProcesses,
  type QueryProcessesOptions,
  type QueryValue,
} from './artifacts/artifact-query.ts';
export { ARTIFACT_DEFAULTS } from './defaults.ts';
