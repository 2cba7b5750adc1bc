import type { AgentEvent } from '../agent/types.ts';
import type { TaskPatch, TaskRecord } from './task-types.ts';

/** An agent event's fields without its `type`, as a log entry's `data`; an upstream log is flattened. */
export function eventData(event: AgentEvent): Readonly<Record<string, unknown>> {
  if (event.type === 'upstream-log') return { ...event.entry };
  const { type: _type, ...data } = event;
  return data;
}

/** How an agent event moves a task's current step and budget use; `undefined` when it does not. */
export function applyAgentEvent(task: TaskRecord, event: AgentEvent): Omit<TaskPatch, 'status'> | undefined {
  switch (event.type) {
    case 'step-start':
      return { currentStep: `step ${event.step}` };
    case 'llm-request':
      return { currentStep: `step ${event.step}: waiting for the model` };
    case 'llm-response':
      return {
        currentStep: `step ${event.step}: the model answered (${event.finishReason})`,
        usage: {
          ...task.usage,
          inputTokens: task.usage.inputTokens + event.usage.inputTokens,
          outputTokens: task.usage.outputTokens + event.usage.outputTokens,
          totalTokens: task.usage.totalTokens + event.usage.totalTokens,
        },
      };
    case 'tool-call':
      return { currentStep: `step ${event.step}: calling ${event.toolName}` };
    case 'tool-result':
      return { currentStep: `step ${event.step}: ${event.toolName} answered${event.isError ? ' with an error' : ''}` };
    case 'tool-error':
      return { currentStep: `step ${event.step}: ${event.toolName} failed (${event.code})` };
    case 'step-end':
      return { currentStep: `step ${event.step} done`, usage: { ...task.usage, steps: event.step, costUsd: event.costUsd } };
    case 'budget':
      return { currentStep: `the ${event.name} budget ran out (${event.used} of ${event.limit})` };
    default:
      return undefined;
  }
}
