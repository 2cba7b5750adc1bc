import type { AgentUsage } from '../../agent/types.ts';
import type { AgentEvent } from '../../agent/agent-event.ts';
import type { AgentEventData } from '../store/log-entry.ts';
import type { TaskPatch, TaskRecord, TaskStore } from '../store/task-types.ts';

/** An agent event's fields without its `type`, as a log entry's `data`; an upstream log is flattened. */
export function eventData<Event extends AgentEvent>(event: Event): AgentEventData<Event> {
  // `AgentEventData` says this per event; a generic `Event` is not narrowed by its `type`, so the union is.
  const known: AgentEvent = event;
  if (known.type === 'upstream-log') return { ...known.entry } as AgentEventData<Event>;
  const { type: _type, ...data } = known;
  return data as AgentEventData<Event>;
}

/** `usage` with the tokens `used` added. */
const withTokens = (usage: TaskRecord['usage'], used: AgentUsage): TaskRecord['usage'] => ({
  ...usage,
  inputTokens: usage.inputTokens + used.inputTokens,
  outputTokens: usage.outputTokens + used.outputTokens,
  totalTokens: usage.totalTokens + used.totalTokens,
});

/** How an agent event moves a task's current step and budget use; `undefined` when it does not. */
function applyAgentEvent(task: TaskRecord, event: AgentEvent): Omit<TaskPatch, 'status'> | undefined {
  switch (event.type) {
    case 'step-start':
      return { currentStep: `step ${event.step}` };
    case 'llm-request':
      return { currentStep: `step ${event.step}: waiting for the model` };
    case 'llm-response':
      return {
        currentStep: `step ${event.step}: the model answered (${event.finishReason})`,
        usage: withTokens(task.usage, event.usage),
      };
    case 'artifact-map':
      return {
        currentStep: `step ${event.step}: mapped ${event.artifact.id} in ${event.chunks} chunks`,
        usage: withTokens(task.usage, event.usage),
      };
    case 'artifact-query':
      return { currentStep: `step ${event.step}: queried ${event.tables.join(', ') || 'the artifacts'}: ${event.rows} rows in ${event.elapsedMs} ms` };
    case 'tool-call':
      return { currentStep: `step ${event.step}: calling ${event.toolName}` };
    case 'tool-result':
      return { currentStep: `step ${event.step}: ${event.toolName} answered${event.isError ? ' with an error' : ''}` };
    case 'tool-error':
      return { currentStep: `step ${event.step}: ${event.toolName} failed (${event.code})` };
    case 'code-call': {
      const what = `step ${event.step}: program call ${event.call}: ${event.name}${event.target === undefined ? '' : ` ${event.target}`}${event.error === undefined ? '' : ' failed'}`;
      // A program's sub-calls count in the task's tokens as each host call ends, as a map's do.
      return event.usage === undefined ? { currentStep: what } : { currentStep: what, usage: withTokens(task.usage, event.usage) };
    }
    case 'step-end':
      return { currentStep: `step ${event.step} done`, usage: { ...task.usage, steps: event.step, costUsd: event.costUsd } };
    case 'budget':
      return { currentStep: `the ${event.name} budget ran out (${event.used} of ${event.limit})` };
    default:
      return undefined;
  }
}

/** A running task's step and budget use, as its run's events move them. */
export interface TaskProgress {
  /** Moves the task by an agent event (most do not). */
  apply(event: AgentEvent): void;
  /** Moves the task by a patch of its own (not its status). */
  note(patch: TaskPatch): void;
  /** Writes what moved since the last write, now: before the task ends. */
  save(): void;
}

/**
 * The progress of `task` as it runs. A step's events move it many times a turn of the loop; the store
 * gets one write a turn, by a transition that applies only while the task is `running`, so a late write
 * never overwrites how the task ended.
 */
export function createProgress(store: TaskStore, task: TaskRecord): TaskProgress {
  let current = task;
  let unsaved: TaskPatch | undefined;
  const save = (): void => {
    const patch = unsaved;
    unsaved = undefined;
    if (patch !== undefined) void store.transition(task.id, ['running'], patch).catch(() => {});
  };
  const note = (patch: TaskPatch): void => {
    if (unsaved === undefined) setImmediate(save);
    unsaved = { ...unsaved, ...patch };
  };
  return {
    apply(event) {
      const patch = applyAgentEvent(current, event);
      if (patch === undefined) return;
      current = { ...current, ...patch };
      note(patch);
    },
    note,
    save,
  };
}
