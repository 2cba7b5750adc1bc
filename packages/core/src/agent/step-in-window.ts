import type { ModelMessage } from 'ai';
import type { KlymError } from '../errors.ts';
import { contextLengthExceeded, type ContextWindow } from './context-window.ts';
import type { StepInput, StepOutcome } from './run-step.ts';
import { ZERO_USAGE } from './usage.ts';

/**
 * What a shrink aims at when the provider refused a request as too long without saying its window: three
 * quarters of the request.
 */
const SHRINK_WITHOUT_FIGURES = 0.75;

/**
 * Runs a step (`run`) only if its request fits the model's context window with room for the answer: a
 * request known not to fit is never sent, and the step fails with `CONTEXT_OVERFLOW`. When the provider
 * still refuses the request as too long, the request is shrunk — the oldest tool results, not the latest
 * step's, replaced in what is sent by a note saying they were dropped to fit (the run's history keeps them)
 * — and sent once more, with a `context-shrunk` event; the results stay dropped for the rest of the run.
 * A request that cannot be shrunk enough, or is refused again, fails the step with `CONTEXT_OVERFLOW`, the
 * provider's error as its cause. The usage each request reports corrects the window's count of the next.
 */
export async function runStepInWindow(input: StepInput, window: ContextWindow, run: (input: StepInput) => Promise<StepOutcome>): Promise<StepOutcome> {
  const fit = window.fits(input.messages);
  if (!fit.fits) return notSent(window.overflow(fit.tokens));
  const sent = window.sendable(input.messages);
  const first = await run({ ...input, messages: sent, ...counted(window, fit.tokens) });
  const said = first.error === undefined ? undefined : contextLengthExceeded(first.error);
  if (said === undefined || first.text !== '' || first.toolCalls.length > 0) return learned(window, sent, first);

  window.refused(sent, said);
  const before = window.requestTokens(input.messages);
  // Without the provider's window, the request is known only to be too long: it must lose a good part.
  const target = said.window === undefined ? Math.min(window.fits(input.messages).limit, Math.floor(before * SHRINK_WITHOUT_FIGURES)) : undefined;
  const shrunk = window.shrink(input.messages, target);
  if (shrunk === undefined || shrunk.dropped === 0) return notSent(window.overflow(before, first.error));
  input.emit({
    type: 'context-shrunk',
    step: input.step,
    droppedResults: shrunk.dropped,
    tokensBefore: before,
    tokens: shrunk.tokens,
    window: window.window,
    reason: 'the provider refused the request as longer than its context window',
  });
  const retried = window.sendable(input.messages);
  const second = await run({ ...input, messages: retried, ...counted(window, shrunk.tokens) });
  const again = second.error === undefined ? undefined : contextLengthExceeded(second.error);
  if (again === undefined || second.text !== '' || second.toolCalls.length > 0) return learned(window, retried, second);
  window.refused(retried, again);
  return notSent(window.overflow(window.requestTokens(input.messages), second.error));
}

function counted(window: ContextWindow, tokens: number): { requestTokens?: number } {
  return Number.isFinite(window.window) ? { requestTokens: tokens } : {};
}

function learned(window: ContextWindow, sent: readonly ModelMessage[], outcome: StepOutcome): StepOutcome {
  if (outcome.error === undefined && !outcome.usage.estimated) window.reported(sent, outcome.usage.inputTokens);
  return outcome;
}

/** A step whose request was not sent, or refused: nothing happened, nothing was spent. */
function notSent(error: KlymError): StepOutcome {
  return { text: '', finishReason: undefined, usage: ZERO_USAGE, messages: [], toolCalls: [], aborted: false, error, continues: false };
}
