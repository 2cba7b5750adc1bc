import type { ArtifactBackend } from '../artifacts/artifact-types.ts';
import type { TaskStore } from './task-types.ts';

/** Task `taskId`'s artifacts in its task store: kept with the task, evicted with it. */
export function taskArtifacts(store: TaskStore, taskId: string): ArtifactBackend {
  return {
    save: (artifact) => store.saveArtifact(taskId, artifact),
    load: (id) => store.loadArtifact(taskId, id),
    list: () => store.listArtifacts(taskId),
  };
}
