import type { AgentEvent } from '@klym/core';

/**
 * The event types of a run that calls tools in its first step and answers in its second, as `onEvent`
 * hears them (`upstream-log` entries left out: when they come depends on the upstream): the calls go out
 * as the model streams them, their results come back, then the model's answer ends the step.
 */
export function toolStepThenAnswer(toolCalls = 1): AgentEvent['type'][] {
  return [
    'run-start',
    'step-start',
    'llm-request',
    ...Array.from({ length: toolCalls }, () => 'tool-call' as const),
    ...Array.from({ length: toolCalls }, () => 'tool-result' as const),
    'llm-response',
    'step-end',
    'step-start',
    'llm-request',
    'llm-response',
    'step-end',
    'run-end',
  ];
}

/** The types of `events` in order, `upstream-log` entries left out. */
export const eventTypes = (events: readonly AgentEvent[]): AgentEvent['type'][] =>
  events.filter((event) => event.type !== 'upstream-log').map((event) => event.type);
