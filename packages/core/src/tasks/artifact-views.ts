import type { ArtifactInfo } from '../artifacts/artifact-types.ts';

/** An artifact of a task, as `check_task_status` lists it. */
export interface TaskArtifactView {
  readonly id: string;
  readonly tool: string;
  readonly bytes: number;
  readonly lines: number;
}

/** Lines of a task's artifact, as `read_task_artifact` answers. */
export interface TaskArtifactSliceView {
  readonly task_id: string;
  readonly artifact: TaskArtifactView;
  /** The first line given, 0-based. */
  readonly offset: number;
  readonly lines: readonly string[];
  /** The `offset` of the lines that follow, when some do. */
  readonly next_offset?: number;
}

/** Artifacts a status shows at a glance: the newest few, and how many more. */
export const GLANCE_ARTIFACTS = 5;

/** The newest `shown` of a task's artifacts as the status lists them, and how many it leaves out. */
export function artifactsView(artifacts: readonly ArtifactInfo[], shown: number): { readonly artifacts?: readonly TaskArtifactView[]; readonly artifacts_more?: number } {
  if (artifacts.length === 0) return {};
  const listed = artifacts.slice(-shown).map(viewArtifact);
  return { artifacts: listed, ...(artifacts.length > listed.length ? { artifacts_more: artifacts.length - listed.length } : {}) };
}

/** An artifact as a task's views name it. */
export function viewArtifact(artifact: ArtifactInfo): TaskArtifactView {
  return { id: artifact.id, tool: artifact.tool, bytes: artifact.bytes, lines: artifact.lines };
}
