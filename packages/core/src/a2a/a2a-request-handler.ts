import { type AgentCard, type Message, type Task } from '@a2a-js/sdk';
import {
  ContentTypeNotSupportedError,
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import { isKlymError } from '../errors.ts';
import type { Caller, StartOptions } from '../tasks/task-manager-types.ts';
import { parseArgs, startTaskSchema } from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskRecord } from '../tasks/store/task-types.ts';
import type { TaskPush } from '../webhooks/task-push.ts';
import { answerTask } from './a2a-answer.ts';
import { listA2aTasks } from './a2a-list-tasks.ts';
import { pushTargetRequestOf, toPushConfig } from './a2a-push.ts';
import { readA2aTask, streamTask, waitForStop } from './a2a-stream.ts';

/** The metadata key (on the message, else on the request) whose object holds what `start_async_agent_task` takes beside the prompt. */
export const KLYM_METADATA_KEY = 'klym';

/** The start arguments a message's `klym` metadata may carry; the prompt and the idempotency key come from the message itself. */
const METADATA_FIELDS = ['model', 'budget', 'tools', 'webhook', 'system_prompt', 'record_result'] as const;

/** Options of {@link createA2aRequestHandler}. */
export interface A2aRequestHandlerOptions {
  /** The Agent Card the handler answers (`getAgentCard`), for the version check. */
  readonly card: () => Promise<AgentCard>;
  /**
   * The extended Agent Card (`GetExtendedAgentCard`), answered only to an authenticated caller, whose call's
   * context it is given. @default none: `ExtendedAgentCardNotConfiguredError`
   */
  readonly extendedCard?: (context: ServerCallContext) => Promise<AgentCard>;
  /**
   * The longest a `SendMessage` without `returnImmediately` waits for its task to end before it answers
   * the task as it stands (a task's own `timeout_ms` bounds it too). @default 60_000
   */
  readonly maxBlockMs?: number;
  /** How often a wait or a stream reads the store when no event of this process says the task changed. @default 1_000 */
  readonly pollIntervalMs?: number;
}

/**
 * The key of the context's `state` where the transport may put an `AbortSignal` that ends a stream (the client went):
 * a stream of a task that waits for its caller could otherwise watch it for as long as it waits.
 */
export const STREAM_SIGNAL_STATE = 'klym.streamSignal';

/** The signal the transport gave a streaming call, if any. */
function streamSignalOf(context: ServerCallContext): AbortSignal | undefined {
  const signal = context.state.get(STREAM_SIGNAL_STATE);
  return signal instanceof AbortSignal ? signal : undefined;
}

/** The caller's principal, which the transport puts on the context as the user's name. */
function callerOf(context: ServerCallContext): Caller {
  const user = context.user;
  // The app authenticates every request before it reaches the handler; a context without a user is a wiring bug.
  if (user === undefined || !user.isAuthenticated) throw new Error('Klym A2A: the request reached the handler without an authenticated principal');
  return { principal: user.userName };
}

/** Klym's refusals as the A2A errors the spec names; the one place they are mapped. */
export function toA2aError(error: unknown): unknown {
  if (!isKlymError(error)) return error;
  if (error.code === 'TASK_NOT_FOUND') return new TaskNotFoundError(error.message);
  if (error.code === 'INVALID_ARGUMENT') return new RequestMalformedError(error.message);
  // A reply to a task no longer waiting (answered already: the first reply wins) is, like one to a running task, an operation Klym does not take now.
  if (error.code === 'TASK_NOT_WAITING') return new UnsupportedOperationError(error.message);
  // Queue full, quota, shutting down, store down: an internal error whose message says which (and names no secret).
  return new Error(`${error.code}: ${error.message}`, { cause: error });
}

const guarded =
  <Args extends unknown[], Result>(method: (...args: Args) => Promise<Result>) =>
  async (...args: Args): Promise<Result> => {
    try {
      return await method(...args);
    } catch (error) {
      throw toA2aError(error);
    }
  };

/** The service's push targets, or the spec's refusal when it sends no push notifications. */
function pushOf(service: TaskService): TaskPush {
  if (service.push === undefined) {
    throw new PushNotificationNotSupportedError(
      'Klym sends no push notifications here (the operator set no a2a.pushAllow): poll GetTask, use SubscribeToTask, or a configured webhook (metadata.klym.webhook)',
    );
  }
  return service.push;
}

/** A push URL the allow-list admits; else `PushNotificationNotSupportedError` saying why (the spec's answer for a push the agent will not make). */
async function assertPushUrl(push: TaskPush, url: string): Promise<void> {
  const verdict = await push.check(url);
  if (!verdict.allowed) throw new PushNotificationNotSupportedError(verdict.reason);
}

/**
 * An A2A request handler (the SDK's `A2ARequestHandler`) served from Klym's task service itself, not the
 * SDK's default handler, event bus or task store: an A2A task IS a Klym task, with the same id, owner and
 * transitions, readable through every other door (`check_task_status`, MCP tasks, REST, the dashboard).
 *
 * - `SendMessage`: the message's text parts are the prompt, its `messageId` the idempotency key, its
 *   `metadata.klym` what else `start_async_agent_task` takes (`model`, `budget`, `tools`, `webhook`),
 *   parsed with the same schema. With `configuration.returnImmediately` it answers the task at once;
 *   without, it waits (at most `maxBlockMs`) until the task ends or asks its caller (`TASK_STATE_INPUT_REQUIRED`,
 *   A2A §3.2.2) and answers the task as it stands.
 * - A task that asks is `TASK_STATE_INPUT_REQUIRED`, its question the status message (an approval's call also as
 *   a data part `{ toolName, input }`). A message carrying its `taskId` answers it ({@link answerTask}): text for a
 *   question, a data part `{ approve, reason? }` for an approval; a blocking one returns at the next question or the
 *   end. A message to a task that has ended, or that asks nothing now, answers `UnsupportedOperationError`.
 * - `SendStreamingMessage`: the `Task`, then a status update at each change of state or step, the result
 *   artifact, until the task ends or asks (A2A §11.7: the answer's own stream goes on). `SubscribeToTask`: the
 *   same, through questions, until the task ends (A2A §3.1.6); on a task that has ended it answers
 *   `UnsupportedOperationError`: `GetTask` reads it.
 * - `GetTask`, `ListTasks` (the caller's tasks, newest first: see {@link listA2aTasks}), `CancelTask`
 *   (`TaskNotCancelableError` once ended).
 * - Push notifications (`configuration.taskPushNotificationConfig` of a send, and the four config methods)
 *   through the service's `push` (`TaskService.push`): a URL outside the operator's allow-list, or any push
 *   when the service has none, answers `PushNotificationNotSupportedError` (-32003) saying why.
 * - `GetExtendedAgentCard`: `options.extendedCard` for the authenticated caller.
 * - Another principal's task answers `TaskNotFoundError`, as an unknown one does.
 */
export function createA2aRequestHandler(service: TaskService, options: A2aRequestHandlerOptions): A2ARequestHandler {
  const maxBlockMs = options.maxBlockMs ?? 60_000;
  const watchOptions = (signal?: AbortSignal) => ({
    ...(signal === undefined ? {} : { signal }),
    ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
  });

  const read = (id: string, caller: Caller, historyLength?: number): Promise<Task> =>
    readA2aTask(service, id, caller, historyLength === undefined ? {} : { length: historyLength });

  /** Starts the task a message asks for, or answers the one it names (`taskId`): a message naming a task never starts one. */
  const start = async (params: Parameters<A2ARequestHandler['sendMessage']>[0], caller: Caller): Promise<TaskRecord> => {
    const { message } = params;
    if (message === undefined) throw new RequestMalformedError('`message` is required');
    const config = params.configuration?.taskPushNotificationConfig;
    if (message.taskId !== '') {
      return answerTask(service, message, caller, async () => {
        if (config === undefined) return;
        const push = pushOf(service);
        await assertPushUrl(push, config.url);
        await push.set(message.taskId, caller, pushTargetRequestOf(config));
      });
    }
    const texts: string[] = [];
    for (const part of message.parts) {
      if (part.content?.$case !== 'text') throw new ContentTypeNotSupportedError(`Klym takes text parts only, got a ${part.content?.$case ?? 'empty'} part`);
      texts.push(part.content.value);
    }
    const metadata: unknown = message.metadata?.[KLYM_METADATA_KEY] ?? params.metadata?.[KLYM_METADATA_KEY];
    if (metadata !== undefined && (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))) {
      throw new RequestMalformedError(`\`metadata.${KLYM_METADATA_KEY}\`: expected an object of ${METADATA_FIELDS.join(', ')}`);
    }
    const extra = Object.fromEntries(
      Object.entries(metadata ?? {}).map(([key, value]) => [(METADATA_FIELDS as readonly string[]).includes(key) ? key : `${KLYM_METADATA_KEY}.${key}`, value]),
    );
    const args = parseArgs(startTaskSchema, {
      ...extra,
      prompt: texts.join('\n'),
      ...(message.messageId === '' ? {} : { idempotency_key: message.messageId }),
    });
    // A push config is admitted before the task starts: a refused URL starts nothing.
    let startOptions: StartOptions | undefined;
    if (config !== undefined) {
      const push = pushOf(service);
      await assertPushUrl(push, config.url);
      startOptions = { push: [await push.admit(pushTargetRequestOf(config))] };
    }
    const started = await service.start(args, caller.principal, startOptions);
    return service.tasks.get(started.task_id, caller);
  };

  const stream = (id: string, caller: Caller, context: ServerCallContext, untilInterrupted: boolean) =>
    streamTask(service, id, caller, { ...watchOptions(streamSignalOf(context)), untilInterrupted });

  return {
    getAgentCard: () => options.card(),
    getAuthenticatedExtendedAgentCard: guarded(async (_params, context) => {
      callerOf(context); // only for an authenticated caller
      if (options.extendedCard === undefined) throw new ExtendedAgentCardNotConfiguredError('Klym has no extended agent card here');
      return options.extendedCard(context);
    }),
    sendMessage: guarded(async (params, context): Promise<Message | Task> => {
      const caller = callerOf(context);
      const task = await start(params, caller);
      if (params.configuration?.returnImmediately !== true) {
        const limitMs = Math.min(maxBlockMs, task.request.budget?.timeoutMs ?? maxBlockMs);
        await waitForStop(service, task.id, caller, watchOptions(AbortSignal.timeout(limitMs)));
      }
      return read(task.id, caller, params.configuration?.historyLength);
    }),
    sendMessageStream: async function* (params, context) {
      try {
        const caller = callerOf(context);
        const task = await start(params, caller);
        yield* stream(task.id, caller, context, true);
      } catch (error) {
        throw toA2aError(error);
      }
    },
    resubscribe: async function* (params, context) {
      try {
        const caller = callerOf(context);
        const task = await service.tasks.get(params.id, caller); // TASK_NOT_FOUND for an unknown or another principal's id
        if (isTerminal(task.status))
          throw new UnsupportedOperationError(`Task ${params.id} has already ended (${task.status}): there is nothing to subscribe to; GetTask reads it`);
        yield* stream(params.id, caller, context, false);
      } catch (error) {
        throw toA2aError(error);
      }
    },
    getTask: guarded(async (params, context) => read(params.id, callerOf(context), params.historyLength)),
    listTasks: guarded(async (params, context) => listA2aTasks(service, callerOf(context), params)),
    cancelTask: guarded(async (params, context) => {
      const caller = callerOf(context);
      const outcome = await service.cancel({ task_id: params.id }, caller.principal);
      if (!outcome.cancelled && isTerminal(outcome.status))
        throw new TaskNotCancelableError(`Task ${params.id} has already ended (${outcome.status}): ${outcome.message}`);
      return read(params.id, caller);
    }),
    createTaskPushNotificationConfig: guarded(async (params, context) => {
      const push = pushOf(service);
      const caller = callerOf(context);
      await service.tasks.get(params.taskId, caller);
      await assertPushUrl(push, params.url);
      return toPushConfig(params.taskId, await push.set(params.taskId, caller, pushTargetRequestOf(params)));
    }),
    getTaskPushNotificationConfig: guarded(async (params, context) => {
      const target = (await pushOf(service).list(params.taskId, callerOf(context))).find((candidate) => candidate.id === params.id);
      if (target === undefined) throw new TaskNotFoundError(`Task ${params.taskId} has no push notification config ${JSON.stringify(params.id)}`);
      return toPushConfig(params.taskId, target);
    }),
    listTaskPushNotificationConfigs: guarded(async (params, context) => ({
      configs: (await pushOf(service).list(params.taskId, callerOf(context))).map((target) => toPushConfig(params.taskId, target)),
      nextPageToken: '',
    })),
    deleteTaskPushNotificationConfig: guarded(async (params, context) => pushOf(service).delete(params.taskId, callerOf(context), params.id)),
  };
}
