import type { ClientCapabilities, ElicitRequestFormParams } from '@modelcontextprotocol/server';
import { KlymError, isKlymError } from '../errors.ts';
import type { TaskService } from '../tasks/task-service.ts';
import { isReplied, type TaskInput, type TaskRecord, type TaskReply } from '../tasks/store/task-types.ts';

// What both MCP eras share about a task waiting for its caller (`input_required`): the elicitation that asks
// for the reply (2025-11-25: sent through `tasks/result`; 2026-07-28: an entry of the task's `inputRequests`),
// and the one way an elicitation's result becomes `TaskManager.reply`.

/** What a caller's elicitation result is, in either era: the spec's `ElicitResult`, checked here. */
export interface ElicitationAnswer {
  readonly action: 'accept' | 'decline' | 'cancel';
  readonly content?: Readonly<Record<string, unknown>>;
}

/**
 * The answer a question gets when its caller declines it (elicitation `decline`): the model is told so and goes
 * on without it, rather than the task waiting for an answer that the caller has said will not come.
 */
export const DECLINED_ANSWER = 'The caller declined to answer this question.';

/** The reason a declined approval is denied with, when the caller gave none. */
export const DECLINED_REASON = 'declined';

/** The input `task` waits for, while it waits for one not yet replied to. */
export function waitingInput(task: TaskRecord): TaskInput | undefined {
  return task.status === 'input_required' && task.input !== undefined && !isReplied(task.input) ? task.input : undefined;
}

/**
 * A key for one ask of a task, unique over the task's life (the 2026-07-28 Tasks extension, "Task Update
 * Requests": a key is never reused): the tool call that asked, and when. A run that resumes and asks again
 * asks at another time.
 */
export const inputKeyOf = (input: TaskInput): string => `${input.toolCallId}@${input.askedAt}`;

/**
 * Whether a client can be sent a form elicitation: it declared `elicitation`, with `form` or without any mode
 * (before modes, `elicitation: {}` meant form; a client that lists only `url` cannot take a form).
 */
export function takesFormElicitation(capabilities: ClientCapabilities | undefined): boolean {
  const elicitation = capabilities?.elicitation as { form?: unknown; url?: unknown } | undefined;
  if (elicitation === undefined) return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}

/** How a caller without elicitation answers instead, for a task's `statusMessage`. */
export function replyToolHint(task: TaskRecord, input: TaskInput): string {
  const body = input.kind === 'approval' ? `{ task_id: "${task.id}", approve: true | false, reason? }` : `{ task_id: "${task.id}", answer }`;
  return `answer with reply_to_agent_task ${body}`;
}

/**
 * The form elicitation (`elicitation/create`, `mode: "form"`) asking for `input`'s reply: a question asks for
 * a string `answer`; an approval for a boolean `approve` and an optional string `reason`, its message naming
 * the call. The schema is the spec's restricted form schema (flat, primitive properties).
 */
export function elicitationOf(input: TaskInput): ElicitRequestFormParams {
  if (input.kind === 'approval') {
    const toolName = input.call?.toolName ?? 'a tool';
    return {
      mode: 'form',
      // The approval's question is the call in words; named here should a question ever leave the tool out.
      message: input.question.includes(toolName) ? input.question : `${toolName}: ${input.question}`,
      requestedSchema: {
        type: 'object',
        properties: {
          approve: { type: 'boolean', title: 'Approve', description: `Run ${toolName} as shown (true), or deny it (false)` },
          reason: { type: 'string', title: 'Reason', description: 'Why, told to the agent with your decision' },
        },
        required: ['approve'],
      },
    };
  }
  return {
    mode: 'form',
    message: input.question,
    requestedSchema: {
      type: 'object',
      properties: { answer: { type: 'string', title: 'Answer', description: 'Your answer; the agent goes on with it' } },
      required: ['answer'],
    },
  };
}

/**
 * The reply an elicitation result gives `input`, or `undefined` to leave the task waiting:
 * - `accept`: its content, `{ answer }` for a question, `{ approve, reason? }` for an approval;
 * - `decline` (the caller said no): an approval is denied (its `reason`, if the content has one, else
 *   {@link DECLINED_REASON}); a question is answered {@link DECLINED_ANSWER}, so the run goes on without it;
 * - `cancel` (dismissed without a choice; the elicitation spec's "prompt again later"): nothing, the task still
 *   waits, for another elicitation or `reply_to_agent_task`.
 * @throws {KlymError} `INVALID_ARGUMENT` naming what is wrong with the result (an action or a content that does not fit the ask)
 */
export function replyOfElicitation(input: TaskInput, result: unknown): TaskReply | undefined {
  const answer = result as { action?: unknown; content?: unknown } | null;
  const content = (typeof answer?.content === 'object' && answer.content !== null ? answer.content : {}) as Record<string, unknown>;
  const reason = content['reason'];
  if (reason !== undefined && typeof reason !== 'string')
    throw new KlymError('INVALID_ARGUMENT', `Expected the elicitation's \`reason\` to be a string, got ${typeof reason}`);
  const withReason = reason === undefined || reason === '' ? {} : { reason };
  switch (answer?.action) {
    case 'cancel':
      return undefined;
    case 'decline':
      return input.kind === 'approval' ? { approve: false, reason: withReason.reason ?? DECLINED_REASON } : { answer: DECLINED_ANSWER };
    case 'accept':
      if (input.kind === 'approval') {
        if (typeof content['approve'] !== 'boolean')
          throw new KlymError(
            'INVALID_ARGUMENT',
            `The approval of ${input.call?.toolName ?? 'a call'} takes \`approve\` (a boolean) in the elicitation's content, got ${describe(content['approve'])}`,
          );
        return { approve: content['approve'], ...withReason };
      }
      if (typeof content['answer'] !== 'string')
        throw new KlymError('INVALID_ARGUMENT', `A question takes \`answer\` (a string) in the elicitation's content, got ${describe(content['answer'])}`);
      return { answer: content['answer'] };
    default:
      throw new KlymError('INVALID_ARGUMENT', `Expected an elicitation result's \`action\` to be accept, decline or cancel, got ${describe(answer?.action)}`);
  }
}

const describe = (value: unknown): string => (value === undefined ? 'none' : `${typeof value} ${JSON.stringify(value)}`.slice(0, 80));

/** What {@link answerInput} did. */
export type InputAnswerOutcome = 'replied' | 'left-waiting' | 'not-waiting';

/**
 * Replies to the ask `key` of the caller's task `taskId` with an elicitation result ({@link replyOfElicitation}).
 * A task no longer waiting on that ask (answered first elsewhere, by `reply_to_agent_task` or another front,
 * cancelled, or waiting on a later ask) is left as it is: the first reply wins, and this one is `not-waiting`.
 * @throws {KlymError} `TASK_NOT_FOUND`; `INVALID_ARGUMENT` for a result that does not fit the ask
 */
export async function answerInput(service: TaskService, taskId: string, principal: string, key: string, result: unknown): Promise<InputAnswerOutcome> {
  const caller = { principal };
  const task = await service.tasks.get(taskId, caller);
  const input = waitingInput(task);
  if (input === undefined || inputKeyOf(input) !== key) return 'not-waiting';
  const reply = replyOfElicitation(input, result);
  if (reply === undefined) return 'left-waiting';
  try {
    await service.tasks.reply(taskId, caller, reply);
    return 'replied';
  } catch (error) {
    if (isKlymError(error, 'TASK_NOT_WAITING')) return 'not-waiting';
    throw error;
  }
}
