import { Role, TaskState, type Artifact, type Message, type Part, type Task } from '@a2a-js/sdk';
import type { ArtifactInfo } from '../artifacts/artifact-types.ts';
import { isReplied, type TaskInput, type TaskRecord, type TaskStatus } from '../tasks/store/task-types.ts';

/** The A2A state of each Klym status. */
export const A2A_STATE_OF: Readonly<Record<TaskStatus, TaskState>> = {
  pending: TaskState.TASK_STATE_SUBMITTED,
  running: TaskState.TASK_STATE_WORKING,
  input_required: TaskState.TASK_STATE_INPUT_REQUIRED,
  completed: TaskState.TASK_STATE_COMPLETED,
  error: TaskState.TASK_STATE_FAILED,
  cancelled: TaskState.TASK_STATE_CANCELED,
};

/** The A2A state of `task`: as its status maps, except that a task queued again after its caller answered is still `working`, not `submitted`. */
export function a2aStateOf(task: Pick<TaskRecord, 'status' | 'input'>): TaskState {
  return task.status === 'pending' && isReplied(task.input) ? TaskState.TASK_STATE_WORKING : A2A_STATE_OF[task.status];
}

/** Whether A2A calls `state` interrupted (A2A §3.2.2): the task waits for its caller, and a blocking send or a message stream ends there. */
export const isInterrupted = (state: TaskState | undefined): boolean =>
  state === TaskState.TASK_STATE_INPUT_REQUIRED || state === TaskState.TASK_STATE_AUTH_REQUIRED;

/** The Klym status of an A2A state, for `ListTasks`' filter; `undefined` for states Klym never has (auth-required, rejected, …). */
export function klymStatusOf(state: TaskState): TaskStatus | undefined {
  return (Object.keys(A2A_STATE_OF) as TaskStatus[]).find((status) => A2A_STATE_OF[status] === state);
}

/** The metadata key of a Klym message or task (`metadata.klym`). */
const KLYM = 'klym';

/** The artifact id of a completed task's final answer. */
export const RESULT_ARTIFACT_ID = 'result';

const textPart = (text: string): Part => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const dataPart = (value: Record<string, unknown>): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

/** What the agent says of the task now: the step while it runs, the Klym code when it failed, why it was cancelled. */
function statusText(task: TaskRecord): string | undefined {
  switch (task.status) {
    case 'pending':
    case 'running':
      return task.currentStep === '' ? undefined : task.currentStep;
    case 'input_required':
      return task.input?.question ?? '';
    case 'error':
      return task.error === undefined ? 'The task failed' : `${task.error.code}: ${task.error.message}`;
    case 'cancelled':
      return `Cancelled: ${task.cancelReason ?? 'by caller'}`;
    case 'completed':
      return undefined;
  }
}

/**
 * The message a question of a task is, as A2A carries it: the question as text; for an approval also a data part
 * `{ toolName, input }` (the call), for a program to decide on, and `metadata.klym` saying how to reply (`kind`,
 * `reply`). Its id is the question's own, so a client tells two questions of one task apart.
 */
function questionMessage(taskId: string, input: TaskInput): Message {
  const approval = input.kind === 'approval';
  return {
    messageId: `${taskId}:input:${input.askedAt}`,
    contextId: taskId,
    taskId,
    role: Role.ROLE_AGENT,
    parts:
      approval && input.call !== undefined
        ? [textPart(input.question), dataPart({ toolName: input.call.toolName, input: input.call.input })]
        : [textPart(input.question)],
    metadata: {
      [KLYM]: approval
        ? { kind: 'approval', reply: 'SendMessage with this taskId and a data part { "approve": true | false, "reason"?: "…" }' }
        : { kind: 'question', reply: 'SendMessage with this taskId and the answer as text' },
    },
    extensions: [],
    referenceTaskIds: [],
  };
}

/** A message of the caller's in a task's history: its prompt, or its reply to a question (text, or a decision as data). */
function userMessage(taskId: string, messageId: string, part: Part): Message {
  return { messageId, contextId: taskId, taskId, role: Role.ROLE_USER, parts: [part], metadata: undefined, extensions: [], referenceTaskIds: [] };
}

/**
 * An agent message about `task`, as A2A carries it in `status.message`: for a task in `input_required`, its
 * question ({@link questionMessage}); else `text` (the step, the error, why it was cancelled).
 */
export function agentMessage(task: TaskRecord, text: string): Message {
  if (task.status === 'input_required' && task.input !== undefined) return questionMessage(task.id, task.input);
  return {
    messageId: `${task.id}:${task.status}`,
    contextId: task.id,
    taskId: task.id,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/**
 * The messages of a task, oldest first (A2A §3.2.4): the caller's prompt, then each question the task asked and
 * the caller's reply to it (the last `KEPT_INPUTS`, 50, questions a record keeps). `historyLength` keeps the
 * most recent that many; 0 none.
 */
export function historyOf(task: TaskRecord, historyLength?: number): Message[] {
  if (historyLength !== undefined && historyLength <= 0) return [];
  const messages = [userMessage(task.id, `${task.id}:prompt`, textPart(task.request.prompt))];
  for (const input of [...(task.earlierInputs ?? []), ...(task.input === undefined ? [] : [task.input])]) {
    messages.push(questionMessage(task.id, input));
    const messageId = `${task.id}:reply:${input.askedAt}`;
    if (input.answer !== undefined) messages.push(userMessage(task.id, messageId, textPart(input.answer)));
    else if (input.approved !== undefined)
      messages.push(userMessage(task.id, messageId, dataPart({ approve: input.approved, ...(input.reason === undefined ? {} : { reason: input.reason }) })));
  }
  return historyLength === undefined ? messages : messages.slice(-historyLength);
}

/**
 * A Klym task as an A2A `Task`: the same id (also its `contextId`: Klym tasks take no follow-up), the state
 * mapped, the step or the error in `status.message`, and when it completed its final answer as the text
 * artifact `result`. Big tool results the run kept (`artifacts`) are listed by id, size and tool, never
 * inlined: read them with `read_task_artifact` or `GET /api/tasks/:id/artifacts/:artifact`. With `history`, its
 * messages ({@link historyOf}); without, none (a stream's updates and pushes carry none).
 */
export function toA2aTask(task: TaskRecord, artifacts: readonly ArtifactInfo[] = [], history?: { readonly length?: number }): Task {
  const text = statusText(task);
  const listed: Artifact[] = [];
  if (task.status === 'completed' && task.result !== undefined) {
    listed.push({
      artifactId: RESULT_ARTIFACT_ID,
      name: 'result',
      description: 'The final answer',
      parts: [textPart(task.result.finalText)],
      metadata: undefined,
      extensions: [],
    });
  }
  for (const artifact of artifacts) {
    listed.push({
      artifactId: artifact.id,
      name: artifact.id,
      description: `The result of ${artifact.tool}, kept whole: read it with read_task_artifact`,
      parts: [dataPart({ id: artifact.id, tool: artifact.tool, bytes: artifact.bytes, lines: artifact.lines, created_at: artifact.createdAt })],
      metadata: undefined,
      extensions: [],
    });
  }
  return {
    id: task.id,
    contextId: task.id,
    status: {
      state: a2aStateOf(task),
      message: text === undefined ? undefined : agentMessage(task, text),
      timestamp: task.finishedAt ?? task.startedAt ?? task.createdAt,
    },
    artifacts: listed,
    history: history === undefined ? [] : historyOf(task, history.length),
    metadata: { [KLYM]: { status: task.status, ...(task.request.model === undefined ? {} : { model: task.request.model }), steps: task.usage.steps } },
  };
}
