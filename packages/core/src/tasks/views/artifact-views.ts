import type { ArtifactSlice } from '../../artifacts/artifact-store.ts';
import type { ArtifactInfo } from '../../artifacts/artifact-types.ts';

/** An artifact of a task, as `check_task_status` lists it. */
export interface TaskArtifactView {
  readonly id: string;
  readonly tool: string;
  readonly bytes: number;
  readonly lines: number;
  /** For a JSON result kept as records: how many, the line of the first, its keys, and the original JSON's size. */
  readonly records?: { readonly count: number; readonly first_line: number; readonly keys: readonly string[]; readonly original_bytes: number };
}

/**
 * A page of a task's artifact, as `read_task_artifact` answers: lines (the first from `char_offset` in it,
 * the last in part when `next_char_offset` is set), or with `original`, characters of the original text.
 */
export interface TaskArtifactSliceView {
  readonly task_id: string;
  readonly artifact: TaskArtifactView;
  /** The first line given, 0-based; with `original`, the first character. */
  readonly offset: number;
  /** Where the first line starts, when not at its start. */
  readonly char_offset?: number;
  readonly lines?: readonly string[];
  /** With `original`: the characters from `offset`. */
  readonly text?: string;
  /** Where the next page starts, when there is one: a line (and `next_char_offset` in it), or a character of the original. */
  readonly next_offset?: number;
  readonly next_char_offset?: number;
}

/** Artifacts a status shows at a glance: the newest few, and how many more. */
export const GLANCE_ARTIFACTS = 5;

/** The newest `shown` of a task's artifacts as the status lists them, and how many it leaves out. */
export function artifactsView(
  artifacts: readonly ArtifactInfo[],
  shown: number,
): { readonly artifacts?: readonly TaskArtifactView[]; readonly artifacts_more?: number } {
  if (artifacts.length === 0) return {};
  const listed = artifacts.slice(-shown).map(viewArtifact);
  return { artifacts: listed, ...(artifacts.length > listed.length ? { artifacts_more: artifacts.length - listed.length } : {}) };
}

/** An artifact as a task's views name it. */
export function viewArtifact(artifact: ArtifactInfo): TaskArtifactView {
  const { records } = artifact;
  return {
    id: artifact.id,
    tool: artifact.tool,
    bytes: artifact.bytes,
    lines: artifact.lines,
    ...(records === undefined
      ? {}
      : { records: { count: records.count, first_line: records.firstLine, keys: records.keys, original_bytes: records.originalBytes } }),
  };
}

/**
 * What `query_task_artifact` answers: the rows as CSV with a header line, as many as fit in a bounded
 * answer; `rows_shown` below `rows` says the rest were left out, and `note` how to get them.
 */
export interface TaskQueryView {
  readonly task_id: string;
  readonly columns: readonly { readonly name: string; readonly type: string }[];
  /** Rows of the answer in all, counted up to the query's `maxRows`. */
  readonly rows: number;
  /** Set when counting stopped at `maxRows`: the answer has more than `rows` rows. */
  readonly rows_more?: true;
  /** Rows `csv` holds: all of them, unless the answer was too big to send. */
  readonly rows_shown: number;
  readonly csv: string;
  readonly elapsed_ms: number;
  readonly note?: string;
}

/** A page of task `taskId`'s artifact as `read_task_artifact` answers it. */
export function viewSlice(taskId: string, slice: ArtifactSlice): TaskArtifactSliceView {
  const first = slice.lines[0];
  return {
    task_id: taskId,
    artifact: viewArtifact(slice.artifact),
    offset: slice.offset,
    ...(first?.fromChar === undefined || first.fromChar === 0 ? {} : { char_offset: first.fromChar }),
    lines: slice.lines.map((line) => line.text),
    ...(slice.next === undefined
      ? {}
      : { next_offset: slice.next.offset, ...(slice.next.charOffset === undefined ? {} : { next_char_offset: slice.next.charOffset }) }),
  };
}
