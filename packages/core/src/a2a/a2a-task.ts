import { Role, TaskState, type Artifact, type Message, type Part, type Task } from '@a2a-js/sdk';
import type { ArtifactInfo } from '../artifacts/artifact-types.ts';
import type { TaskRecord, TaskStatus } from '../tasks/task-types.ts';

/** The A2A state of each Klym status. */
export const A2A_STATE_OF: Readonly<Record<TaskStatus, TaskState>> = {
  pending: TaskState.TASK_STATE_SUBMITTED,
  running: TaskState.TASK_STATE_WORKING,
  // Until A2A can carry the answer (`SendMessage` with the task's id), a waiting task is `working` there, its question the status message.
  input_required: TaskState.TASK_STATE_WORKING,
  completed: TaskState.TASK_STATE_COMPLETED,
  error: TaskState.TASK_STATE_FAILED,
  cancelled: TaskState.TASK_STATE_CANCELED,
};

/** The Klym status of an A2A state, for `ListTasks`' filter; `undefined` for states Klym never has (input-required, …). */
export function klymStatusOf(state: TaskState): TaskStatus | undefined {
  return (Object.keys(A2A_STATE_OF) as TaskStatus[]).find((status) => A2A_STATE_OF[status] === state);
}

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
      return `Waiting for the caller's answer (reply_to_agent_task): ${task.input?.question ?? ''}`;
    case 'error':
      return task.error === undefined ? 'The task failed' : `${task.error.code}: ${task.error.message}`;
    case 'cancelled':
      return `Cancelled: ${task.cancelReason ?? 'by caller'}`;
    case 'completed':
      return undefined;
  }
}

/** An agent message about `task`, as A2A carries it in `status.message`. */
export function agentMessage(task: TaskRecord, text: string): Message {
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
 * A Klym task as an A2A `Task`: the same id (also its `contextId`: Klym tasks take no follow-up), the state
 * mapped, the step or the error in `status.message`, and when it completed its final answer as the text
 * artifact `result`. Big tool results the run kept (`artifacts`) are listed by id, size and tool, never
 * inlined: read them with `read_task_artifact` or `GET /api/tasks/:id/artifacts/:artifact`.
 */
export function toA2aTask(task: TaskRecord, artifacts: readonly ArtifactInfo[] = []): Task {
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
      state: A2A_STATE_OF[task.status],
      message: text === undefined ? undefined : agentMessage(task, text),
      timestamp: task.finishedAt ?? task.startedAt ?? task.createdAt,
    },
    artifacts: listed,
    history: [],
    metadata: { klym: { status: task.status, ...(task.request.model === undefined ? {} : { model: task.request.model }), steps: task.usage.steps } },
  };
}
