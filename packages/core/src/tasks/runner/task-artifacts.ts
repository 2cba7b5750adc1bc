import { pageOf, type ArtifactBackend } from '../../artifacts/artifact-types.ts';
import type { TaskQueries } from './task-queries.ts';
import type { TaskStore } from '../store/task-types.ts';

/**
 * Task `taskId`'s artifacts in its task store: kept with the task, evicted with it; with `queries`, queried
 * in the task's own DuckDB, under `signal` (the task's: a cancelled or timed-out task interrupts its query).
 */
export function taskArtifacts(store: TaskStore, taskId: string, queries?: TaskQueries, signal?: AbortSignal): ArtifactBackend {
  const backend: ArtifactBackend = {
    save: (artifact) => store.saveArtifact(taskId, artifact),
    load: (id) => store.loadArtifact(taskId, id),
    list: () => store.listArtifacts(taskId),
  };
  if (queries === undefined) return backend;
  // A table is loaded from the store a slice at a time: a query never reads an artifact (and its original) whole.
  const source = {
    load: backend.load,
    list: backend.list,
    save: backend.save,
    loadRange: (id: string, start: number, end: number) => store.loadArtifactRange(taskId, id, start, end),
  };
  return {
    ...backend,
    query: (sql, options = {}) => {
      const signals = [options.signal, signal].filter((one) => one !== undefined);
      const page = pageOf(options);
      return queries.query(
        taskId,
        source,
        sql,
        signals.length === 0 ? page : { ...page, signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals) },
      );
    },
  };
}
