import { randomUUID } from 'node:crypto';
import { KlymError } from '../errors.ts';
import type { Caller, TaskRecord, TaskStore } from '../tasks/store/task-types.ts';
import type { PushUrlVerdict } from './push-allow.ts';
import type { ResolvedPushOptions } from './push-delivery.ts';
import type { PushTarget } from './push-types.ts';
import type { WebhookDispatcher } from './webhook-dispatcher.ts';

/** A push target as a caller gives it: the id is made when none is given. */
export type PushTargetRequest = Omit<PushTarget, 'id'> & { readonly id?: string };

/**
 * The push targets of the caller's tasks (A2A's push notification configs), as the task service serves
 * them: each kept on its task's record, so every process sharing the store tells it of the task's
 * transitions. A change is one atomic step of the store (`addPushTarget`, `removePushTarget`): of concurrent
 * changes to one task's targets, each applies. Every method checks that the caller can see the task
 * (`TASK_NOT_FOUND` else, as for an unknown id).
 */
export interface TaskPush {
  /** Whether the operator's allow-list admits `url`, and why not. */
  check(url: string): Promise<PushUrlVerdict>;
  /**
   * Admits a target given with a new task's start (`StartOptions.push`): the URL checked, the credentials'
   * shape checked, an id made when none is given.
   * @throws {KlymError} `INVALID_ARGUMENT` saying why (the allow-list's reason for a URL)
   */
  admit(request: PushTargetRequest): Promise<PushTarget>;
  /**
   * Adds `request` to the task (replacing its target of the same id) and tells the target of the task as it
   * stands: its first message, which the task's later transitions follow. Works on a finished task too
   * (the first message is then its end).
   * @throws {KlymError} `TASK_NOT_FOUND`; `INVALID_ARGUMENT` for a refused URL, bad credentials, or one target too many
   */
  set(taskId: string, caller: Caller, request: PushTargetRequest): Promise<PushTarget>;
  /** The task's targets, oldest first. @throws {KlymError} `TASK_NOT_FOUND` */
  list(taskId: string, caller: Caller): Promise<readonly PushTarget[]>;
  /** Removes the task's target `id`; nothing is sent to it any more. Removing one that is not there changes nothing. @throws {KlymError} `TASK_NOT_FOUND` */
  delete(taskId: string, caller: Caller, id: string): Promise<void>;
}

/** What the task service builds {@link TaskPush} from. */
export interface TaskPushContext {
  /** The tasks a caller may see (the task manager): a target is kept only on a task its caller sees. */
  readonly tasks: { get(id: string, caller: Caller): Promise<TaskRecord> };
  readonly store: TaskStore;
  readonly dispatcher: WebhookDispatcher;
  readonly options: ResolvedPushOptions;
}

/** An HTTP auth scheme (RFC 9110 token) and credentials of visible ASCII: nothing that could break a header. */
const SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
const CREDENTIALS = /^[\x20-\x7e]{0,4096}$/;
const TARGET_ID = /^[\x21-\x7e]{1,128}$/;

const refuse = (why: string): KlymError => new KlymError('INVALID_ARGUMENT', why);

/** Creates the task service's {@link TaskPush}. */
export function createTaskPush({ tasks, store, dispatcher, options }: TaskPushContext): TaskPush {
  const admit = async (request: PushTargetRequest): Promise<PushTarget> => {
    const id = request.id === undefined || request.id === '' ? randomUUID() : request.id;
    if (!TARGET_ID.test(id)) throw refuse('A push config id is 1 to 128 visible ASCII characters');
    const { authentication, token } = request;
    if (authentication !== undefined && (!SCHEME.test(authentication.scheme) || !CREDENTIALS.test(authentication.credentials))) {
      throw refuse('`authentication`: expected an HTTP auth scheme (`Bearer`, `Basic`, …) and credentials of printable ASCII, up to 4,096 characters');
    }
    if (token !== undefined && !CREDENTIALS.test(token)) throw refuse('`token`: expected printable ASCII, up to 4,096 characters');
    const verdict = await options.allow.check(request.url);
    if (!verdict.allowed) throw refuse(verdict.reason);
    return {
      id,
      url: verdict.url,
      ...(token === undefined || token === '' ? {} : { token }),
      ...(authentication === undefined || authentication.scheme === ''
        ? {}
        : { authentication: { scheme: authentication.scheme, credentials: authentication.credentials } }),
    };
  };

  return {
    check: (url) => options.allow.check(url),
    admit,
    async set(taskId, caller, request) {
      await tasks.get(taskId, caller);
      const target = await admit(request);
      // The store reads the targets as they are when it writes: a read here would be stale by then.
      const updated = await store.addPushTarget(taskId, target, options.maxPerTask);
      if (updated === undefined) throw new KlymError('TASK_NOT_FOUND', `No task ${taskId}`);
      await dispatcher.enqueueSnapshot(updated, target);
      return target;
    },
    async list(taskId, caller) {
      return (await tasks.get(taskId, caller)).push ?? [];
    },
    async delete(taskId, caller, id) {
      await tasks.get(taskId, caller);
      await store.removePushTarget(taskId, id);
    },
  };
}
