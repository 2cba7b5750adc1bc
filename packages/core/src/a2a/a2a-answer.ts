import { TaskState, type Message } from '@a2a-js/sdk';
import { ContentTypeNotSupportedError, RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { Caller } from '../tasks/task-manager-types.ts';
import { parseArgs, replyTaskSchema, type ReplyTaskArgs } from '../tasks/task-request.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isTerminal, type TaskInput, type TaskRecord } from '../tasks/store/task-types.ts';
import { a2aStateOf } from './a2a-task.ts';

/**
 * The reply a caller's message carries to the task it names, as `reply_to_agent_task`'s arguments (parsed with
 * its schema, so every door takes the same replies): its text parts, joined by new lines, are the answer to a
 * question; a data part `{ approve: boolean, reason?: string }` is the decision on an approval.
 * @throws {ContentTypeNotSupportedError} for a part that is neither text nor data (a file)
 * @throws {KlymError} `INVALID_ARGUMENT` naming what is wrong (an empty message, a data part of other keys, both kinds)
 */
export function replyArgsOf(taskId: string, message: Message): ReplyTaskArgs {
  const texts: string[] = [];
  let decision: Record<string, unknown> | undefined;
  for (const part of message.parts) {
    const content = part.content;
    if (content?.$case === 'text') texts.push(content.value);
    else if (content?.$case === 'data') {
      if (decision !== undefined) throw new RequestMalformedError('An answer carries at most one data part: { "approve": true | false, "reason"?: "…" }');
      decision = content.value as Record<string, unknown>;
    } else {
      throw new ContentTypeNotSupportedError(
        `An answer to task ${taskId} is text (to a question) or a data part { approve, reason? } (to an approval), not a ${content?.$case ?? 'empty'} part`,
      );
    }
  }
  const answer = texts.join('\n');
  return parseArgs(replyTaskSchema, { ...(answer === '' ? {} : { answer }), ...decision, task_id: taskId });
}

/**
 * Answers the caller's task that waits for input with `message` (a `SendMessage` carrying its `taskId`): the
 * reply goes through the service as `reply_to_agent_task`'s does, so the first reply wins whichever door it
 * came through, and the task is queued to go on from where it asked. The same message sent again (its `messageId`
 * the first reply's) answers the task as it stands: a retry, not a second reply. `beforeReply` runs once the task is found
 * waiting (the handler stores a push config given with the message there). Returns the task as it stands after the reply (`pending`: A2A `working`).
 * @throws {TaskNotFoundError} (as `KlymError` `TASK_NOT_FOUND`) for an unknown task or another principal's
 * @throws {UnsupportedOperationError} for a task that has ended (A2A §3.1.1), or one that asks nothing now
 * @throws {RequestMalformedError} for a `contextId` that is not the task's (A2A §3.4.3), or a reply of the wrong kind
 */
export async function answerTask(service: TaskService, message: Message, caller: Caller, beforeReply?: () => Promise<void>): Promise<TaskRecord> {
  const id = message.taskId;
  const task = await service.tasks.get(id, caller);
  if (message.contextId !== '' && message.contextId !== task.id) {
    throw new RequestMalformedError(`\`message.contextId\` ${JSON.stringify(message.contextId)} is not the context of task ${id} (${task.id})`);
  }
  // The same answer sent again (a client's retry after a lost response): the task as it stands, not a second reply.
  // The same message is the same id with the same reply: a sender that reuses an id for another text is answering anew.
  const earlier = message.messageId === '' ? undefined : [...(task.earlierInputs ?? []), task.input].find((input) => input?.replyId === message.messageId);
  if (earlier !== undefined && isSameReply(earlier, replyArgsOf(id, message))) return task;
  if (isTerminal(task.status)) {
    throw new UnsupportedOperationError(`Task ${id} has ended (${task.status}) and takes no more messages: send a new message, without taskId, for new work`);
  }
  // A2A §3.3.3 lets an agent take messages for any task not ended; a Klym task takes one only as the answer it asked for.
  // The request is well formed, so not invalid params: the operation is one Klym does not support for a task in this state.
  if (task.status !== 'input_required') {
    const state = TaskState[a2aStateOf(task)];
    throw new UnsupportedOperationError(
      `Task ${id} is ${state} and asks nothing now: a Klym task takes a message only while it is TASK_STATE_INPUT_REQUIRED, as the answer to its question`,
    );
  }
  const args = replyArgsOf(id, message);
  await beforeReply?.();
  await service.reply(args, caller.principal, message.messageId === '' ? {} : { replyId: message.messageId });
  return service.tasks.get(id, caller);
}

/** Whether `args` is the reply `input` took: the same answer, or the same decision with the same reason. */
function isSameReply(input: TaskInput, args: ReplyTaskArgs): boolean {
  return args.answer === undefined ? input.approved === args.approve && input.reason === args.reason : input.answer === args.answer;
}
