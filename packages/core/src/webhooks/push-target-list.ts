import { KlymError } from '../errors.ts';
import type { PushTarget } from './push-types.ts';

/**
 * Task `taskId`'s push targets with `target` added last, in place of the one with its id: what every store's
 * `addPushTarget` writes, within the step that read `targets`.
 * @throws {KlymError} `INVALID_ARGUMENT` when the task already has `max` targets besides one of `target.id`
 */
export function withPushTarget(taskId: string, targets: readonly PushTarget[] | undefined, target: PushTarget, max: number): readonly PushTarget[] {
  const others = (targets ?? []).filter((existing) => existing.id !== target.id);
  if (others.length >= max) throw tooManyPushTargets(taskId, others.length);
  return [...others, target];
}

/** Push targets without the one of id `id`; `undefined` when none is left, as a task without targets has no `push`. */
export function withoutPushTarget(targets: readonly PushTarget[] | undefined, id: string): readonly PushTarget[] | undefined {
  const kept = (targets ?? []).filter((target) => target.id !== id);
  return kept.length === 0 ? undefined : kept;
}

/** The refusal of one push target too many for task `taskId`, which has `count`. */
export const tooManyPushTargets = (taskId: string, count: number): KlymError =>
  new KlymError('INVALID_ARGUMENT', `Task ${taskId} has ${count} push configs, the most a task may have: delete one first`);
