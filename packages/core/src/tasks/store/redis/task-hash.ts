import type { TaskPatch, TaskRecord } from '../task-types.ts';
import type { ScriptReply } from './scripts.ts';

/** A task's identity: set once by `insert`, never by a patch (as in the SQLite store). */
const IDENTITY = new Set(['id', 'principal', 'request', 'createdAt']);

/** A patch as the change script takes it: fields to set (field, JSON, …) and fields to delete. */
export interface HashPatch {
  readonly set: readonly string[];
  readonly deleted: readonly string[];
}

/** `task` as its hash's fields: field, JSON, … (a key whose value has no JSON, like `undefined`, is left out). */
export function taskFields(task: TaskRecord): string[] {
  const fields: string[] = [];
  for (const [key, value] of Object.entries(task)) {
    const json = JSON.stringify(value) as string | undefined;
    if (json !== undefined && !key.startsWith(':')) fields.push(key, json);
  }
  return fields;
}

/** `patch` as fields to set and delete: a key set to `undefined` is deleted, as spreading it would drop it from the JSON. */
export function hashPatch(patch: TaskPatch): HashPatch {
  const set: string[] = [];
  const deleted: string[] = [];
  for (const [key, value] of Object.entries(patch)) {
    if (IDENTITY.has(key) || key.startsWith(':')) continue;
    const json = JSON.stringify(value) as string | undefined;
    // A status is only ever replaced: a task without one would be in no index.
    if (json === undefined) {
      if (key !== 'status') deleted.push(key);
    } else set.push(key, json);
  }
  return { set, deleted };
}

/** The task a hash holds (from HGETALL, as an object or as a script's flat list), or `undefined` when it is empty. */
export function taskOf(fields: ScriptReply | Readonly<Record<string, string>> | undefined): TaskRecord | undefined {
  const entries = Array.isArray(fields) ? pairs(fields) : Object.entries(fields ?? {});
  if (entries.length === 0) return undefined;
  const task: Record<string, unknown> = {};
  for (const [key, value] of entries) if (!key.startsWith(':')) task[key] = JSON.parse(value);
  return task as unknown as TaskRecord;
}

/** The creation time as the index members start with it: milliseconds, 15 digits, so that text order is time order. */
export function createdKey(createdAt: string): string {
  const ms = Date.parse(createdAt);
  return String(Number.isFinite(ms) ? Math.min(Math.max(0, Math.trunc(ms)), 999_999_999_999_999) : 0).padStart(15, '0');
}

/** The finish time in milliseconds, as the `finished` index scores it; `''` when there is none to score. */
export function finishedKey(finishedAt: string | undefined): string {
  const ms = finishedAt === undefined ? Number.NaN : Date.parse(finishedAt);
  return Number.isFinite(ms) ? String(Math.trunc(ms)) : '';
}

/** Whether a record's (or patch's) write-back is under way: such a task is unfinished business after a crash. */
export const writingBack = (task: Pick<TaskRecord, 'writeBack'>): boolean => task.writeBack?.status === 'pending';

/** `[field, value, field, value, …]` as pairs. */
export function pairs(flat: readonly ScriptReply[]): [string, string][] {
  const result: [string, string][] = [];
  for (let index = 0; index + 1 < flat.length; index += 2) result.push([String(flat[index]), String(flat[index + 1])]);
  return result;
}
