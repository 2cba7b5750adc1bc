import { KlymError } from '../errors.ts';
import type { StoredArtifact } from './artifact-types.ts';

/**
 * Caps on the bytes of artifacts a task store keeps (`artifacts` of `createSqliteTaskStore`,
 * `createRedisTaskStore`, `createMemoryTaskStore`), checked in the same atomic step as the save.
 */
export interface ArtifactLimits {
  /** Bytes of artifacts one task keeps at most; one more is refused with `ARTIFACT_LIMIT`. @default ARTIFACT_DEFAULTS.maxBytesPerTask (1 GiB) */
  readonly maxBytesPerTask?: number;
  /**
   * Bytes of artifacts the store keeps in all. A save that would pass it first drops the artifacts of the
   * tasks that finished first, a whole task's at a time (the tasks themselves stay); when what is left
   * belongs to tasks still pending or running, it is refused with `ARTIFACT_LIMIT`.
   * @default ARTIFACT_DEFAULTS.maxBytes (8 GiB) on SQLite; 2 GiB on Redis; in memory, a quarter of the heap's limit
   */
  readonly maxBytes?: number;
}

/** A finished task holding artifacts, as the global cap may drop them: oldest finished first. */
export interface EvictableArtifacts {
  readonly taskId: string;
  /** What its artifacts count against the caps. */
  readonly bytes: number;
}

/** Bytes `artifact` counts against the caps: its text's, and its original JSON's when that is kept too. */
export function keptBytes(artifact: StoredArtifact): number {
  if (artifact.original === undefined) return artifact.bytes;
  return artifact.bytes + (artifact.records?.originalBytes ?? Buffer.byteLength(artifact.original));
}

/**
 * The tasks whose artifacts to drop, from the first of `finished` (oldest first), so that `bytes` more fit
 * under `maxBytes` when `used` are kept; `undefined` when dropping them all would not be enough, so that
 * nothing is dropped for a save that is refused anyway.
 */
export function tasksToEvict(finished: readonly EvictableArtifacts[], used: number, bytes: number, maxBytes: number): string[] | undefined {
  const evictable = finished.reduce((sum, task) => sum + task.bytes, 0);
  if (used - evictable + bytes > maxBytes) return undefined;
  const evicted: string[] = [];
  let left = used;
  for (const task of finished) {
    if (left + bytes <= maxBytes) break;
    evicted.push(task.taskId);
    left -= task.bytes;
  }
  return evicted;
}

/** `ARTIFACT_LIMIT` for a save that would pass its task's cap. */
export const taskLimitError = (artifact: StoredArtifact, maxBytes: number, kept: number): KlymError =>
  new KlymError(
    'ARTIFACT_LIMIT',
    `Keeping this ${keptBytes(artifact)}-byte result of ${artifact.tool} would pass the task's ${maxBytes} bytes of artifacts (${kept} kept)`,
  );

/** `ARTIFACT_LIMIT` for a save that would pass the store's cap even once every finished task's artifacts were dropped. */
export const storeLimitError = (artifact: StoredArtifact, maxBytes: number, used: number, evictable: number): KlymError =>
  new KlymError(
    'ARTIFACT_LIMIT',
    `Keeping this ${keptBytes(artifact)}-byte result of ${artifact.tool} would pass the task store's ${maxBytes} bytes of artifacts ` +
      `(${used} kept, ${used - evictable} of them by tasks not finished yet, which are never dropped)`,
  );
