import { TASK_DEFAULTS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import { positiveNumber } from '../internal/positive.ts';
import { resolveWriteBack, type ResolvedWriteBack } from './runner/write-back.ts';
import type { TaskManagerOptions } from './task-manager-types.ts';

/** The options of a task manager that are settings (numbers and switches), as given. */
export type TaskSettingsOptions = Pick<
  TaskManagerOptions,
  'maxConcurrent' | 'maxQueued' | 'taskTimeoutMs' | 'ttlMs' | 'inputTimeoutMs' | 'resumeOnRestart' | 'askCaller' | 'writeBack'
>;

/** What a task manager is wired to: its options but the settings. */
export type TaskManagerWiring = Omit<TaskManagerOptions, keyof TaskSettingsOptions>;

/** The wiring a task service makes itself rather than pass on: the secrets, the run defaults, the event fan-out. */
type ServiceMade = 'secrets' | 'defaults' | 'onEvent';

/** `keys`, when they are every wiring option a service passes on: a new one not listed fails to compile here. */
const everyWiring = <Keys extends readonly Exclude<keyof TaskManagerWiring, ServiceMade>[]>(
  keys: Keys & ([Exclude<keyof TaskManagerWiring, ServiceMade | Keys[number]>] extends [never] ? unknown : 'a wiring option is not listed'),
): Keys => keys;

/** The wiring a task service hands its manager as it was given: the service's other options stay with it. */
export const PASSED_WIRING = everyWiring([
  'pool',
  'store',
  'log',
  'run',
  'perPrincipal',
  'queue',
  'onRefuse',
  'tracing',
  'artifactQuery',
  'artifactReading',
  'now',
] as const);

/**
 * A task manager's settings, each checked and defaulted once: what the manager, its execution and the task
 * service read, instead of each taking the options and applying the defaults again.
 */
export interface TaskSettings {
  /** Tasks running at once in this process (0 on a front of a shared queue). */
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  readonly taskTimeoutMs: number;
  readonly ttlMs: number;
  readonly inputTimeoutMs: number;
  readonly resumeOnRestart: boolean;
  readonly askCaller: boolean;
  readonly writeBack: ResolvedWriteBack;
}

/**
 * `options`' settings with `TASK_DEFAULTS` applied. `sharedQueue`: the manager is a front of a shared queue,
 * whose `maxConcurrent` may be 0 (it runs nothing itself).
 * @throws {KlymError} `CONFIG_INVALID` naming the option, for a limit that is not a positive number
 */
export function resolveTaskSettings(options: TaskSettingsOptions, sharedQueue: boolean): TaskSettings {
  const concurrency = options.maxConcurrent ?? TASK_DEFAULTS.concurrency;
  return {
    maxConcurrent: sharedQueue ? atLeastZero('maxConcurrent', concurrency) : positiveNumber('maxConcurrent', concurrency),
    maxQueued: positiveNumber('maxQueued', options.maxQueued ?? TASK_DEFAULTS.maxQueued),
    taskTimeoutMs: positiveNumber('taskTimeoutMs', options.taskTimeoutMs ?? TASK_DEFAULTS.timeoutMs),
    ttlMs: positiveNumber('ttlMs', options.ttlMs ?? TASK_DEFAULTS.ttlMs),
    inputTimeoutMs: positiveNumber('inputTimeoutMs', options.inputTimeoutMs ?? TASK_DEFAULTS.inputTimeoutMs),
    resumeOnRestart: options.resumeOnRestart ?? TASK_DEFAULTS.resumeOnRestart,
    askCaller: options.askCaller ?? TASK_DEFAULTS.askCaller,
    writeBack: resolveWriteBack(options.writeBack),
  };
}

function atLeastZero(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new KlymError('CONFIG_INVALID', `Expected \`${name}\` to be a number of at least 0, got ${value}`);
  return value;
}
