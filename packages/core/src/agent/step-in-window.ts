import type { ModelMessage } from 'ai';
import type { KlymError } from '../errors.ts';
import { contextLengthExceeded, type ContextWindow } from './context-window.ts';
import type { StepInput, StepOutcome } from './run-step.ts';
import { ZERO_USAGE } from './usage.ts';

/**
 * Runs a step (`run`) only if its request fits the model's context window with room for the answer: a
 * request known not to fit is never sent, and the step fails with `CONTEXT_OVERFLOW`. When the provider
 * still refuses the request as too long, the request is shrunk — the oldest tool results, not the latest
 * step's, replaced in what is sent by a note saying they were dropped to fit (the run's history keeps them)
 * — and sent once more, with a `context-shrunk` event; the results stay dropped for the rest of the run.
 * The usage each request reports corrects the window's count of the next.
 */
export async function runStepInWindow(input: StepInput, window: ContextWindow, run: (input: StepInput) => Promise<StepOutcome>): Promise<StepOutcome> {
  const fit = window.fits(input.messages);
  if (!fit.fits) return notSent(window.overflow(fit.tokens));
  const sent = window.sendable(input.messages);
  const first = await run({ ...input, messages: sent, ...counted(window, fit.tokens) });
  const said = first.error === undefined ? undefined : contextLengthExceeded(first.error);
  if (said === undefined || first.text !== '' || first.toolCalls.length > 0) return learned(window, sent, first);

  window.refused(sent, said);
  const shrunk = window.shrink(input.messages);
  if (shrunk === undefined) {
    return notSent(window.overflow(window.requestTokens(input.messages), first.error));
  }
  const before = said.tokens ?? fit.tokens;
  input.emit({ type: 'context-shrunk', step: input.step, droppedResults: shrunk.dropped, tokensBefore: before, tokens: shrunk.tokens, window: window.window, reason: 'the provider refused the request as longer than its context window' });
  const retried = window.sendable(input.messages);
  return learned(window, retried, await run({ ...input, messages: retried, ...counted(window, shrunk.tokens) }));
}

function counted(window: ContextWindow, tokens: number): { requestTokens?: number } {
  return Number.isFinite(window.window) ? { requestTokens: tokens } : {};
}

function learned(window: ContextWindow, sent: readonly ModelMessage[], outcome: StepOutcome): StepOutcome {
  if (outcome.error === undefined && !outcome.usage.estimated) window.reported(sent, outcome.usage.inputTokens);
  return outcome;
}

/** A step whose request was not sent: nothing happened, nothing was spent. */
function notSent(error: KlymError): StepOutcome {
  return { text: '', finishReason: undefined, usage: ZERO_USAGE, messages: [], toolCalls: [], aborted: false, error, continues: false };
}
